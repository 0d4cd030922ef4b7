/**
 * Binding a listener with an error that says which one failed, where, and what to change: a
 * runtime's own ("AddrInUse: Address already in use (os error 98)") names none of them.
 *
 * @example
 * ```ts ignore
 * const listener = await bindNamed("tunnels over TCP", "127.0.0.1:7000", "--listen-tcp", () =>
 *   listenTcp({ hostname: "127.0.0.1", port: 7000 }, onTransport));
 * ```
 *
 * @module
 */

/**
 * Runs `bind`; when it fails, throws an error naming `what` listens, `where`, and the `setting`
 * that chooses the address ("cannot listen for tunnels over TCP on 127.0.0.1:7000: the address is
 * in use (another daemon?); choose another with --listen-tcp").
 */
export async function bindNamed<T>(
  what: string,
  where: string,
  setting: string,
  bind: () => Promise<T>,
): Promise<T> {
  try {
    return await bind();
  } catch (error) {
    const err = error as Error & { code?: string };
    const inUse = err.name === "AddrInUse" || err.code === "EADDRINUSE";
    throw new Error(
      inUse
        ? `cannot listen for ${what} on ${where}: the address is in use (another daemon?); ` +
          `choose another with ${setting}`
        : `cannot listen for ${what} on ${where}: ${err.message}`,
      { cause: error },
    );
  }
}
