/**
 * Who a new tunnel or service offer belongs to: its client, or the group the client asks to
 * join. A group's tunnel or offer is served by every member's session together; to join, the
 * client's configuration must list the group and its request must carry the group's key.
 *
 * @module
 */

import type { ClientConfig, GroupConfig } from "../config/mod.ts";
import { tokenMatches } from "../tokens/verifier.ts";
import type { Balance } from "../registry/route_choice.ts";

/** The owner a request joined: `client:NAME` or `group:NAME`, and a group's balance. */
export interface Joined {
  /** `client:NAME` without a group, else `group:NAME`. */
  owner: string;
  /** How the group spreads visitors over its members; undefined for a client's own. */
  balance: Balance | undefined;
}

/**
 * The owner of what `client` asks for with group `name` and `key` (both undefined: the
 * client's own), or a string saying why it may not join.
 */
export function joinGroup(
  client: Pick<ClientConfig, "name" | "groups">,
  groups: Readonly<Record<string, GroupConfig>>,
  name: string | undefined,
  key: string | undefined,
): Joined | string {
  if (name === undefined) return { owner: `client:${client.name}`, balance: undefined };
  const group = groups[name];
  if (!group || !client.groups.includes(name)) return `this client may not join group ${name}`;
  if (!tokenMatches(key ?? "", group.keyHash)) return `wrong key for group ${name}`;
  return { owner: `group:${name}`, balance: group.balance };
}
