import { tcpContract, tcpPairFactory, transportContract } from "./_contract.ts";
import { connectNodeTcp, listenNodeTcp } from "./node_tcp.ts";

// node:net runs under Deno and Bun alike (their compatibility layers), so this always runs.
const adapter = { connect: connectNodeTcp, listen: listenNodeTcp };
transportContract("node_tcp", tcpPairFactory(adapter));
tcpContract("node_tcp", adapter);
