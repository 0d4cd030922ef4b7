/**
 * A tunnel's or an offered service's health check, as the client runs it: one
 * {@linkcode HealthMonitor} per tunnel or offer for as long as the client holds it (across
 * reconnects), whose changes are told to the script and reported to the daemon. A new session's
 * daemon knows nothing yet, so a service that is down is reported to it again.
 *
 * @module
 */

import { HealthMonitor, type HealthOptions } from "./health_check.ts";

/** What holds a health check: a tunnel's or an offer's record. */
export interface HealthHolder {
  /** Its monitor, once started. */
  monitor?: HealthMonitor;
}

/** Who hears about the check of one tunnel or offer. */
export interface HealthListener {
  /** The check changed its verdict (the client's `health` event). */
  changed(healthy: boolean, detail: string | undefined): void;
  /** Tells the daemon; does nothing when the tunnel or offer is gone. */
  report(healthy: boolean, detail?: string): void;
}

/**
 * Starts `holder`'s check of `local` with `options` (none: no check), or, when it runs already
 * (a reconnect), reports to the new session's daemon that the service is down if it is.
 */
export function watchHealth(
  holder: HealthHolder,
  local: string,
  options: HealthOptions | undefined,
  listener: HealthListener,
): void {
  if (!options) return;
  if (!holder.monitor) {
    holder.monitor = new HealthMonitor(local, options, (healthy, detail) => {
      listener.changed(healthy, detail);
      listener.report(healthy, detail);
    });
    holder.monitor.start();
  } else if (!holder.monitor.healthy) listener.report(false, holder.monitor.detail);
}
