package peer

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"
)

type config struct {
	listen    string
	connect   string
	scenario  string
	timeout   time.Duration
	window    uint
	keepalive time.Duration
	backlog   int
	seed      uint64

	count      int
	size       int
	maxSize    int
	bytes      int64
	inflight   int
	expect     int
	chunk      int
	verifySize int
	wait       time.Duration
	verify     bool

	serverOpens      int
	serverOpensSize  int
	serverOpensDelay time.Duration
	goawayAfter      int
	rstAfter         int64
	stdinExit        bool
}

// Scenarios lists the client scenarios in a stable order.
var Scenarios = []string{
	"concurrent", "halfclose", "rst", "ping", "goaway", "dribble", "largewindow",
	"throughput", "rtt", "streams", "accept", "goaway-recv", "rst-recv",
}

func parseFlags(impl Impl, args []string) (*config, error) {
	c := &config{}
	fs := flag.NewFlagSet(impl.Name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&c.listen, "listen", "", "server: listen on HOST:PORT (e.g. 127.0.0.1:0)")
	fs.StringVar(&c.connect, "connect", "", "client: connect to HOST:PORT")
	fs.StringVar(&c.scenario, "scenario", "", "client: scenario name")
	fs.DurationVar(&c.timeout, "timeout", 60*time.Second, "bound on the whole scenario (client) or on -server-opens (server)")
	fs.UintVar(&c.window, "window", 0, "max stream receive window in bytes (0 = library default; largewindow: 16 MiB)")
	fs.DurationVar(&c.keepalive, "keepalive", 10*time.Second, "keepalive ping interval (0 disables)")
	fs.IntVar(&c.backlog, "backlog", 256, "accept backlog / max inflight SYNs")
	fs.Uint64Var(&c.seed, "seed", 1, "seed for sizes and payload bytes")
	fs.IntVar(&c.count, "count", -1, "number of streams / round trips / pings (scenario default)")
	fs.IntVar(&c.size, "size", -1, "bytes per stream (scenario default)")
	fs.IntVar(&c.maxSize, "max-size", 1<<20, "concurrent: max random stream size")
	fs.Int64Var(&c.bytes, "bytes", -1, "throughput/largewindow: bytes through one stream")
	fs.IntVar(&c.inflight, "inflight", -1, "concurrent/streams: max streams in flight")
	fs.IntVar(&c.expect, "expect", -1, "goaway-recv: streams the server accepts before GoAway")
	fs.IntVar(&c.chunk, "chunk", 64*1024, "bytes per Write call")
	fs.IntVar(&c.verifySize, "verify-size", 512, "rst-recv: size of the follow-up echo stream")
	fs.DurationVar(&c.wait, "wait", 500*time.Millisecond, "goaway: how long to watch for peer SYNs after GoAway")
	fs.BoolVar(&c.verify, "verify", true, "throughput: verify echoed bytes")
	fs.IntVar(&c.serverOpens, "server-opens", 0, "server: open N streams to each client and verify their echo")
	fs.IntVar(&c.serverOpensSize, "server-opens-size", 64*1024, "server: bytes per server-opened stream")
	fs.DurationVar(&c.serverOpensDelay, "server-opens-delay", 0, "server: delay before opening streams")
	fs.IntVar(&c.goawayAfter, "goaway-after", 0, "server: send GoAway once N accepted streams finished; reset later ones")
	fs.Int64Var(&c.rstAfter, "rst-after", 0, "server: echo this many bytes of each stream, then reset it")
	fs.BoolVar(&c.stdinExit, "stdin-eof-exit", true, "server: exit when stdin reaches EOF")
	usage := func() {
		fmt.Fprintf(os.Stderr, "usage: %s -listen 127.0.0.1:0 [server flags]\n", impl.Name)
		fmt.Fprintf(os.Stderr, "       %s -connect HOST:PORT -scenario NAME [flags]\n", impl.Name)
		fmt.Fprintf(os.Stderr, "scenarios: %v\n", Scenarios)
		fs.SetOutput(os.Stderr)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage()
			os.Exit(0)
		}
		usage()
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if (c.listen == "") == (c.connect == "") {
		usage()
		return nil, errors.New("exactly one of -listen or -connect is required")
	}
	if c.connect != "" {
		known := false
		for _, s := range Scenarios {
			known = known || s == c.scenario
		}
		if !known {
			return nil, fmt.Errorf("unknown -scenario %q (want one of %v)", c.scenario, Scenarios)
		}
	}
	if c.timeout <= 0 {
		return nil, errors.New("-timeout must be positive")
	}
	if c.chunk <= 0 {
		return nil, errors.New("-chunk must be positive")
	}
	if c.backlog <= 0 {
		return nil, errors.New("-backlog must be positive")
	}
	if c.window != 0 && c.window < 256*1024 {
		return nil, errors.New("-window must be at least 262144 (the yamux initial window)")
	}
	if c.window > 1<<31 {
		return nil, errors.New("-window too large")
	}
	return c, nil
}

func (c *config) options() Options {
	return Options{
		MaxWindow: uint32(c.window),
		KeepAlive: c.keepalive,
		Backlog:   c.backlog,
		Log:       os.Stderr,
	}
}

// def returns v unless it is negative (unset), then d.
func def(v, d int) int {
	if v < 0 {
		return d
	}
	return v
}
