/**
 * A SOCKS5 front on the client: a local listener whose every CONNECT becomes a forward stream to
 * the target the SOCKS client names. The name is not resolved here: the daemon resolves it and
 * checks the resolved address against this client's forward allowlist at dial time, exactly as for
 * `--forward`, so the front is never an open proxy. The SOCKS reply waits for the daemon's answer
 * (a `confirm` forward: its first byte says the target is connected; a refusal is a reset whose
 * reason becomes the reply code).
 *
 * UDP ASSOCIATE is served too (socks_udp.ts): each target of an association is a UDP flow through
 * the daemon, under the same allowlist.
 *
 * Bounded: a deadline on the handshake, one on the daemon's answer, a cap on connections at once
 * (associations included), and the stream's backpressure in both directions as a forward has.
 *
 * @module
 */

import type { Stream } from "../../protocol/stream.ts";
import type { Transport } from "../../protocol/transport.ts";
import { listenTcp } from "../../transport/tcp.ts";
import { type PipeEnd, type PipeHandlers, splice, streamEnd } from "../../tunnel/splice.ts";
import { ResetReason } from "../../tunnel/stream/reset_reasons.ts";
import { formatHostPort, parseHostPort, splitHostPort } from "../../util/net/address.ts";
import { releaseBytes } from "../../util/bytes/buffer_pool.ts";
import { type Deadline, sharedDeadlines } from "../../util/timing/deadlines.ts";
import { constantTimeEqual } from "../../util/crypto/constant_time.ts";
import { sha256 } from "../../util/crypto/sha256.ts";
import { ClientError, describeStreamError } from "../errors.ts";
import type { StreamSource } from "./forward_listener.ts";
import { DEFAULT_SOCKS_LISTEN, type SocksOptions, socksOptionsProblem } from "./socks_options.ts";
import { SocksParser, SocksReply, socksReply, type SocksTarget } from "./socks_parser.ts";
import {
  canonicalIp,
  newSocksUdpStats,
  SOCKS_UDP_IDLE_MS,
  SOCKS_UDP_MAX_TARGETS,
  SocksUdpAssociation,
  type SocksUdpStats,
} from "./socks_udp.ts";

export { DEFAULT_SOCKS_LISTEN, socksOptionsProblem };
export type { SocksOptions, SocksUdpStats };

/** Where a SOCKS front's streams come from: TCP forwards, and UDP flows for UDP ASSOCIATE. */
export interface SocksSource extends StreamSource {
  /** A UDP flow's stream to `target` (`host:port`), through the daemon. */
  openUdp(target: string): Stream;
}

/** A running SOCKS front. */
export interface SocksServer {
  /** The local address it listens on (the real port when 0 was asked for). */
  readonly address: string;
  /**
   * Live counters: connections accepted, `active` now, `refused` (handshake failures, refused
   * or failed CONNECTs and UDP ASSOCIATEs, connections over the cap), bytes `aToB` toward
   * targets, `bToA` back, and what UDP associations did (`udp`).
   */
  readonly stats: {
    connections: number;
    active: number;
    refused: number;
    aToB: number;
    bToA: number;
    udp: SocksUdpStats;
  };
  /**
   * Stops listening; open connections continue. Resolves once the address can be bound again (a
   * front restarted on its port, after a reload).
   */
  close(): Promise<void>;
}

/** The reply code that tells a SOCKS client why the daemon refused or failed a forward. */
export function socksReplyForReset(resetCode: number | undefined): number {
  switch (resetCode) {
    case ResetReason.NotAllowed:
    case ResetReason.LoopbackDenied:
    case ResetReason.MetadataDenied:
    case ResetReason.AddressDenied:
      return SocksReply.NotAllowed;
    case ResetReason.ResolveFailed:
    case ResetReason.DialFailed:
      return SocksReply.HostUnreachable;
    case ResetReason.DialRefused:
      return SocksReply.ConnectionRefused;
    case ResetReason.DialTimeout:
      return SocksReply.TtlExpired;
    case ResetReason.NetworkUnreachable:
      return SocksReply.NetworkUnreachable;
    default:
      return SocksReply.GeneralFailure;
  }
}

/**
 * A check of RFC 1929 credentials against `user` and `password` that takes the same time
 * whatever it is given: SHA-256 digests of both, compared without an early exit.
 */
function credentialCheck(
  user: string,
  password: string,
): (user: Uint8Array, password: Uint8Array) => boolean {
  const digest = (a: Uint8Array | string, b: Uint8Array | string) =>
    new Uint8Array([...sha256(a), ...sha256(b)]);
  const expected = digest(user, password);
  return (u, p) => constantTimeEqual(digest(u, p), expected);
}

/**
 * Listens on `options.listen` and serves SOCKS5 CONNECT and UDP ASSOCIATE through streams from the
 * source `via` returns at each request, or each new UDP target (it throws when no session can take
 * one: a CONNECT then gets "general failure", a datagram is dropped). Throws a `TypeError` for a
 * non-loopback address without credentials, or UDP limits that are not positive. Refusals and
 * failures go to `onError`.
 */
export async function listenSocks(
  options: SocksOptions,
  via: () => SocksSource,
  onError: (error: ClientError) => void,
): Promise<SocksServer> {
  const problem = socksOptionsProblem(options);
  if (problem) throw new TypeError(problem);
  const limits: Limits = {
    handshakeTimeoutMs: options.handshakeTimeoutMs ?? 10_000,
    connectTimeoutMs: options.connectTimeoutMs ?? 30_000,
    udpIdleMs: options.udpIdleMs ?? SOCKS_UDP_IDLE_MS,
    udpMaxTargets: options.udpMaxTargets ?? SOCKS_UDP_MAX_TARGETS,
  };
  const maxConnections = options.maxConnections ?? 256;
  const check = options.user ? credentialCheck(options.user, options.password!) : undefined;
  const stats = {
    connections: 0,
    active: 0,
    refused: 0,
    aToB: 0,
    bToA: 0,
    udp: newSocksUdpStats(),
  };
  let full = false;
  const listener = await listenTcp(parseHostPort(options.listen), (local) => {
    stats.connections++;
    if (stats.active >= maxConnections) {
      stats.refused++;
      // Said once per spell at the cap, not once per connection a flood brings.
      if (!full) {
        onError(
          new ClientError(
            "limit_reached",
            `socks: ${maxConnections} connections at once; closing new ones until some end`,
          ),
        );
      }
      full = true;
      return local.close();
    }
    stats.active++;
    new SocksConnection(local, {
      parser: new SocksParser(check ? { credentials: check } : {}),
      limits,
      via,
      stats,
      onError,
      done: () => {
        stats.active--;
        if (stats.active < maxConnections) full = false;
      },
    }).start();
  });
  return {
    address: formatHostPort(listener.hostname, listener.port),
    stats,
    close: () => listener.close(),
  };
}

interface Limits {
  handshakeTimeoutMs: number;
  connectTimeoutMs: number;
  udpIdleMs: number;
  udpMaxTargets: number;
}

interface ConnectionContext {
  parser: SocksParser;
  limits: Limits;
  via: () => SocksSource;
  stats: SocksServer["stats"];
  onError: (error: ClientError) => void;
  /** The connection is closed. */
  done: () => void;
}

/** How long a refused connection may linger, reading, after its reply and FIN. */
const LINGER_MS = 2_000;

/**
 * One SOCKS connection: the handshake, the wait for the daemon, then a splice. The local socket is
 * started once, with handlers that follow the phase: a transport takes its handlers only once.
 */
class SocksConnection {
  readonly #local: Transport;
  readonly #context: ConnectionContext;
  #phase:
    | "handshake"
    | "connecting"
    | "relay"
    | "associating"
    | "associated"
    | "refused"
    | "closed" = "handshake";
  /** The one deadline of the current phase (handshake, the daemon's answer, lingering). */
  #deadline: Deadline | undefined;
  #stream: Stream | undefined;
  #target: SocksTarget | undefined;
  /** The splice's handlers for the local side, once relaying. */
  #relay: PipeHandlers | undefined;
  #localEnded = false;
  /** The UDP association, once UDP ASSOCIATE is answered. */
  #association: SocksUdpAssociation | undefined;
  /** What the request was, for the log. */
  #command = "CONNECT";

  constructor(local: Transport, context: ConnectionContext) {
    this.#local = local;
    this.#context = context;
  }

  start(): void {
    this.#deadline = sharedDeadlines.add(this.#context.limits.handshakeTimeoutMs, () => {
      if (this.#phase === "handshake") {
        this.#context.stats.refused++;
        this.#local.close();
      }
    });
    this.#local.start({
      // Chunks may be pooled: each is released here, or handed on with its claim to a write.
      releases: true,
      data: (chunk) => this.#onData(chunk),
      drain: () => this.#relay?.drain(),
      end: () => this.#onEnd(),
      close: (error) => this.#onClose(error),
    });
  }

  #onData(chunk: Uint8Array): void {
    switch (this.#phase) {
      case "handshake":
        return this.#handshake(chunk);
      case "connecting":
        // The client spoke before the reply (optimistic data): it waits in the stream's window.
        if (!this.#stream!.write(chunk)) this.#local.pause();
        return;
      case "relay":
        return this.#relay!.data(chunk);
      default:
        // An association's control connection carries nothing; what comes on it is dropped.
        releaseBytes(chunk);
    }
  }

  #handshake(chunk: Uint8Array): void {
    const step = this.#context.parser.push(chunk);
    for (const reply of step.replies) this.#local.write(reply);
    if (step.failure) {
      releaseBytes(chunk);
      this.#context.stats.refused++;
      if (step.badCredentials) {
        this.#context.onError(
          new ClientError("socks_refused", `socks: ${this.#local.remoteAddress}: ${step.failure}`),
        );
      }
      return this.#linger();
    }
    if (step.associate) {
      releaseBytes(chunk);
      return this.#associate(step.associate);
    }
    if (!step.connect) return releaseBytes(chunk);
    this.#connect(step.connect, chunk, step.rest!);
  }

  /**
   * UDP ASSOCIATE: bind a relay socket where the client reached us and name it in the reply. The
   * association lives as long as this connection (and no longer than its idle time).
   */
  #associate(request: SocksTarget): void {
    this.#deadline?.cancel();
    this.#command = "UDP ASSOCIATE";
    this.#phase = "associating";
    const peer = splitHostPort(this.#local.remoteAddress);
    const here = splitHostPort(this.#local.localAddress);
    if (!peer || !here) {
      return this.#refuse(SocksReply.GeneralFailure, "the connection's addresses are unknown");
    }
    const clientIp = canonicalIp(peer.host);
    const said = canonicalIp(request.host);
    // A client may name the address it will send from; it must be the one it connected from.
    if (said !== "0.0.0.0" && said !== "::" && said !== clientIp) {
      return this.#refuse(
        SocksReply.NotAllowed,
        `the client at ${clientIp} asked to send from ${said}`,
      );
    }
    const { limits, stats, onError } = this.#context;
    SocksUdpAssociation.open({
      bindHost: canonicalIp(here.host),
      clientIp,
      clientPort: request.port,
      openUdp: (target) => this.#context.via().openUdp(target),
      idleMs: limits.udpIdleMs,
      maxTargets: limits.udpMaxTargets,
      stats: stats.udp,
      onError,
      onIdle: () => this.#local.close(),
    }).then((association) => {
      if (this.#phase !== "associating") return association.close();
      this.#association = association;
      this.#phase = "associated";
      this.#local.write(
        socksReply(SocksReply.Succeeded, {
          host: association.local.hostname,
          port: association.local.port,
        }),
      );
    }, (error) => this.#refuse(SocksReply.GeneralFailure, (error as Error).message));
  }

  /** The request is complete: open the stream, with the payload that came with the request. */
  #connect(target: SocksTarget, chunk: Uint8Array, rest: Uint8Array): void {
    this.#deadline?.cancel();
    this.#target = target;
    let stream: Stream;
    try {
      stream = this.#context.via().open(target.address, { confirm: true });
    } catch (error) {
      releaseBytes(chunk);
      return this.#refuse(SocksReply.GeneralFailure, (error as Error).message);
    }
    this.#stream = stream;
    this.#phase = "connecting";
    if (rest.length > 0) {
      if (!stream.write(rest)) this.#local.pause();
    } else releaseBytes(chunk);
    if (this.#localEnded) stream.end();
    this.#deadline = sharedDeadlines.add(this.#context.limits.connectTimeoutMs, () => {
      if (this.#phase !== "connecting") return;
      stream.onClose = null;
      stream.reset(ResetReason.None);
      this.#refuse(
        SocksReply.TtlExpired,
        `no answer from the daemon within ${this.#context.limits.connectTimeoutMs} ms`,
      );
    });
    stream.onDrain = () => this.#local.resume();
    stream.onData = (data) => {
      if (data.length === 0) return;
      if (data[0] !== 0) {
        stream.onClose = null;
        stream.reset(ResetReason.None);
        return this.#refuse(SocksReply.GeneralFailure, "the daemon's answer is not 0");
      }
      this.#connected(stream, data.subarray(1));
    };
    stream.onEnd = () => {
      stream.onClose = null;
      stream.reset(ResetReason.None);
      this.#refuse(SocksReply.GeneralFailure, "the daemon ended the stream without an answer");
    };
    stream.onClose = (error) => {
      const code = (error as { resetCode?: number } | undefined)?.resetCode;
      const hint = code === ResetReason.BadHeader
        ? " (a daemon older than this client cannot answer SOCKS requests)"
        : "";
      this.#refuse(
        socksReplyForReset(code),
        `${error ? describeStreamError(error) : "the stream closed"}${hint}`,
      );
    };
  }

  /** The daemon connected the target: reply, pass what the target already said, splice. */
  #connected(stream: Stream, first: Uint8Array): void {
    this.#deadline?.cancel();
    this.#phase = "relay";
    this.#local.write(socksReply(SocksReply.Succeeded));
    if (first.length > 0) this.#local.write(first);
    const local: PipeEnd = {
      listen: (handlers) => {
        this.#relay = handlers;
        // An end that came while the daemon was dialing was passed on then; the splice needs it too.
        if (this.#localEnded) handlers.end();
      },
      write: (chunk) => this.#local.write(chunk),
      end: () => this.#local.end(),
      pause: () => this.#local.pause(),
      resume: () => this.#local.resume(),
      abort: () => this.#local.close(),
      chunkLimit: 0,
    };
    const { stats, onError } = this.#context;
    const target = this.#target!.address;
    splice(local, streamEnd(stream), { counters: stats }).then((result) => {
      if (result.error) {
        onError(
          new ClientError(
            "forward_failed",
            `socks CONNECT ${target}: ${describeStreamError(result.error)}`,
          ),
        );
      }
    });
  }

  /** Answers the SOCKS client with `code`, tells why, and closes. */
  #refuse(code: number, why: string): void {
    if (this.#phase === "closed" || this.#phase === "refused") return;
    this.#context.stats.refused++;
    this.#local.write(socksReply(code));
    const target = this.#target ? ` ${this.#target.address}` : "";
    this.#context.onError(
      new ClientError("forward_failed", `socks ${this.#command}${target}: ${why}`),
    );
    this.#linger();
  }

  /**
   * After a refusal: FIN, and read what the client still sends until it closes (at most
   * {@linkcode LINGER_MS}), so that closing with unread bytes does not reset the connection
   * and take the reply with it.
   */
  #linger(): void {
    this.#phase = "refused";
    this.#deadline?.cancel();
    this.#local.resume();
    this.#local.end();
    this.#deadline = sharedDeadlines.add(LINGER_MS, () => this.#local.close());
  }

  #onEnd(): void {
    this.#localEnded = true;
    switch (this.#phase) {
      case "handshake":
      case "refused":
      case "associating":
      case "associated":
        // The client is done with the association: it ends with its control connection.
        return this.#local.close();
      case "connecting":
        return this.#stream!.end();
      case "relay":
        return this.#relay!.end();
    }
  }

  #onClose(error?: Error): void {
    const phase = this.#phase;
    this.#phase = "closed";
    this.#deadline?.cancel();
    this.#association?.close();
    if (phase === "relay") this.#relay!.close(error);
    else if (phase === "connecting") {
      const stream = this.#stream!;
      stream.onClose = null;
      stream.reset(ResetReason.None);
    }
    this.#context.done();
  }
}
