import { tcpContract, tcpPairFactory, transportContract } from "../_contract.ts";
import { isDeno } from "../_test_util.ts";
import { connectDenoTcp, listenDenoTcp } from "./tcp.ts";

// The native Deno adapter exists only under Deno; elsewhere these suites are reported as skipped.
const adapter = { connect: connectDenoTcp, listen: listenDenoTcp };
transportContract("deno/tcp", tcpPairFactory(adapter), { skip: !isDeno });
tcpContract("deno/tcp", adapter, !isDeno);
