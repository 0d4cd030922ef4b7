/**
 * Named services the client offers: what a script asked for, the record kept to offer it again
 * after every reconnect, and the request that offers it.
 *
 * @module
 */

import { parseHostPort } from "../../util/net/address.ts";
import type { HealthMonitor, HealthOptions } from "./health_check.ts";
import type { ControlRequest } from "../connect/requests.ts";

/** Options of `Client.offer`. */
export interface OfferOptions {
  /**
   * Offer the service as a member of this group (with `groupKey`): every member's offer serves
   * the name, and users are balanced across the members. The client's token must allow the
   * group.
   */
  group?: string;
  /** The group's key. */
  groupKey?: string;
  /** Check `local` now and then: while it fails, users go to the name's other offers instead. */
  health?: HealthOptions;
}

/** A service the client offers. */
export interface OfferRecord {
  /** Where its users are sent, `host:port`. */
  local: string;
  /** What the script asked for. */
  options: OfferOptions;
  /** The health check of its local service, when asked for. */
  monitor?: HealthMonitor;
}

/** An offer's record; a bad local address fails here, not at a user. */
export function newOfferRecord(local: string, options: OfferOptions): OfferRecord {
  parseHostPort(local);
  return { local, options };
}

/** The `offer` request for the service `name`. */
export function offerRequest(name: string, record: OfferRecord): ControlRequest {
  const { group, groupKey } = record.options;
  return { type: "offer", service: name, group, groupKey };
}
