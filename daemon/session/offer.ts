/**
 * The `offer` and `withdraw` control requests: a client offers a named service (no public port;
 * other clients reach it by name, see `services.ts`), as its own or as a group's, and withdraws
 * it. The registry keeps who offers what; a name has one owner, whose offers serve it together.
 *
 * @module
 */

import type { Session } from "../../protocol/session.ts";
import type { ClientMessage } from "../../tunnel/control/control.ts";
import type { Logger } from "../../util/log.ts";
import type { ClientConfig, Config } from "../config/mod.ts";
import { canOfferService } from "../policy/policy.ts";
import type { Registry } from "../registry/registry.ts";
import type { Answer } from "./answer.ts";
import { joinGroup } from "./join_group.ts";
import { serviceOffer } from "./services.ts";

/** An `offer` request. */
export type OfferMessage = Extract<ClientMessage, { type: "offer" }>;

/** A `withdraw` request. */
export type WithdrawMessage = Extract<ClientMessage, { type: "withdraw" }>;

/** What `offer` and `withdraw` need from the session and the daemon. */
export interface OfferContext {
  /** The session's id: an offer is the session's. */
  readonly sessionId: string;
  /** The client's yamux session, which users of the service are sent through. */
  readonly yamux: Session;
  /** Where offers are kept (read at each use). */
  readonly registry: Registry;
  /** The session's logger. */
  readonly log: Logger;
  /** The configuration in force now: its groups. */
  config(): Pick<Config, "groups">;
}

/**
 * Offers the service `message` names, as `client`'s or its group's, and answers `ok`; refuses
 * with `not_allowed`, `conflict` (another owner offers it) or `unavailable`.
 */
export async function offer(
  context: OfferContext,
  client: ClientConfig,
  message: OfferMessage,
  answer: Answer,
): Promise<void> {
  const decision = canOfferService(client, message.service);
  if (!decision.ok) return answer.fail("not_allowed", decision.message);
  const joined = joinGroup(client, context.config().groups, message.group, message.groupKey);
  if (typeof joined === "string") return answer.fail("not_allowed", joined);
  const record = serviceOffer({
    name: message.service,
    client: client.name,
    session: context.sessionId,
    node: context.registry.node,
    owner: joined.owner,
    balance: joined.balance,
  }, context.yamux);
  const result = await context.registry.offerService(record);
  if (!result.ok && result.reason === "unavailable") {
    return answer.fail("unavailable", "the cluster registry cannot be reached; try again");
  }
  if (!result.ok) {
    const by = result.holder ? ` (by client ${result.holder.client})` : "";
    return answer.fail("conflict", `service ${message.service} is offered by another owner${by}`);
  }
  context.log.info("service offered", { service: message.service, owner: joined.owner });
  answer.send({ type: "ok", id: message.id });
}

/** Withdraws the session's offer of the service `message` names: `ok`, or `not_found`. */
export async function withdraw(
  context: Pick<OfferContext, "sessionId" | "registry">,
  message: WithdrawMessage,
  answer: Answer,
): Promise<void> {
  if (!await context.registry.withdrawService(message.service, context.sessionId)) {
    return answer.fail("not_found", `this session does not offer ${message.service}`);
  }
  answer.send({ type: "ok", id: message.id });
}
