import { tcpContract, tcpPairFactory, transportContract } from "../_contract.ts";
import { connectNodeTcp, listenNodeTcp } from "./tcp.ts";

// node:net runs under Deno and Bun alike (their compatibility layers), so this always runs.
const adapter = { connect: connectNodeTcp, listen: listenNodeTcp };
transportContract("node/tcp", tcpPairFactory(adapter));
tcpContract("node/tcp", adapter);
