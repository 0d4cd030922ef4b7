import { tcpContract, tcpPairFactory, transportContract } from "../_contract.ts";
import { isBun } from "../_test_util.ts";
import { connectBunTcp, listenBunTcp } from "./tcp.ts";

// The native Bun adapter exists only under Bun; elsewhere these suites are reported as skipped.
// The contract's echo test retains every chunk Bun hands to `data` and compares them at the end:
// that is the check that Bun does not reuse its read buffers.
const adapter = { connect: connectBunTcp, listen: listenBunTcp };
transportContract("bun/tcp", tcpPairFactory(adapter), { skip: !isBun });
tcpContract("bun/tcp", adapter, !isBun);
