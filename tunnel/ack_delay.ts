/**
 * How long a tunnel session's accepted streams keep their ACK back (`SessionConfig.ackDelay`).
 * A visitor's stream is answered by the local service a dial and a reply later, and a forward's
 * by its target the same way: within this delay the ACK rides on that answer, which saves the
 * accepting side a write and the opener a read and a wakeup per connection, and takes the ACK's
 * write off the path to the dial. A stream that stays silent is acknowledged when it is over.
 *
 * @module
 */

/** The `ackDelay` of the daemon's and the client's tunnel sessions, in milliseconds. */
export const TUNNEL_ACK_DELAY_MS = 25;
