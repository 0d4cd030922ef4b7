/** The reading of `iperf3 -u`'s text output that the U5 and U6 scenarios take (no processes). */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { parseIperf3 } from "./measure.ts";

const OUTPUT = `Connecting to host 127.0.0.1, port 45941
[  5] local 127.0.0.1 port 37725 connected to 127.0.0.1 port 45941
[ ID] Interval           Transfer     Bitrate         Total Datagrams
[  5]   0.00-1.00   sec  2.38 MBytes  20.0 Mbits/sec  2080
- - - - - - - - - - - - - - - - - - - - - - - - -
[ ID] Interval           Transfer     Bitrate         Jitter    Lost/Total Datagrams
[  5]   0.00-2.00   sec  4.77 MBytes  20.0 Mbits/sec  0.000 ms  0/4165 (0%)  sender
[  5]   0.00-2.00   sec  4.72 MBytes  19.8 Mbits/sec  0.074 ms  43/4165 (1%)  receiver

iperf Done.
`;

describe("parseIperf3", () => {
  it("reads the receiver's jitter and loss, not the sender's", () => {
    const reading = parseIperf3(OUTPUT);
    assert.equal(reading.jitter_ms, 0.074);
    assert.equal(reading.packets, 4165);
    assert.equal(reading.lost_percent, (100 * 43) / 4165);
  });

  it("says iperf3's error when there is no receiver line", () => {
    assert.throws(
      () => parseIperf3("iperf3: error - control socket has closed unexpectedly\n"),
      /iperf3: control socket has closed unexpectedly/,
    );
    assert.throws(() => parseIperf3("nothing useful"), /no receiver line/);
  });
});
