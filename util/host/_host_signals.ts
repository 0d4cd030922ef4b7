/**
 * Test support for host_test.ts: a program that reports each signal its onHostSignal listeners
 * take and when its launcher is gone, one line each on stdout.
 *
 * @module
 */
import { hostEnv, LAUNCHER_PID_ENV, onHostSignal, watchLauncher } from "./host.ts";

for (const signal of ["SIGTERM", "SIGINT", "SIGHUP"] as const) {
  onHostSignal(signal, () => console.log(signal));
}
watchLauncher(() => console.log("launcher gone"));
console.log(`ready ${hostEnv()[LAUNCHER_PID_ENV] ?? "unset"}`);
setTimeout(() => {}, 60_000); // stays until the test kills it
