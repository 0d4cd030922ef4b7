// Command loadgen is the tunnel benchmark's load generator and backend service, one program for
// every implementation so the only thing that differs between runs is the tunnel in the middle.
//
//	loadgen serve [-udp] -listen 127.0.0.1:0
//	loadgen run -target HOST:PORT -scenario T1|T2|T3|T4|U1|U2|U3|U4 [-bytes N] [-count N]
//	            [-concurrency N] [-size N] [-rate N] [-warmup N] [-handshake] [-timeout D]
//	            [-http HOST]
//
// The backend prints "listening on HOST:PORT" and exits when its stdin closes. Each connection
// starts with one mode byte: 'E' echoes everything after it; 'D' is followed by an 8-byte
// big-endian length N and answers N bytes of a fixed pattern. The load side verifies every byte
// it gets back. With -handshake, run prints {"phase":"ready"} after its warm-up and waits for a
// line on stdin before the timed part, so the caller can read the tunnel's CPU counters around
// exactly that part. The result is one JSON line with "ok". With -http HOST the load speaks
// HTTP/1.1 with that Host instead, and the backend answers it on the same port (http.go). With
// -udp the backend is a UDP echo and the U scenarios are the load (udp.go).
package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// patternPeriod is prime so a chunk's offset into the pattern keeps moving; reads stay below it.
const patternPeriod = 65521

// readChunk is the download reader's buffer size (under patternPeriod, see patternAt).
const readChunk = 32 * 1024

var pattern = func() []byte {
	p := make([]byte, 2*patternPeriod)
	x := uint32(0x9e3779b9)
	for i := 0; i < patternPeriod; i++ {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		p[i] = byte(x)
	}
	copy(p[patternPeriod:], p[:patternPeriod])
	return p
}()

// patternAt is the pattern's n bytes (n <= patternPeriod) starting at stream offset pos.
func patternAt(pos int64, n int) []byte {
	off := int(pos % patternPeriod)
	return pattern[off : off+n]
}

func main() {
	if len(os.Args) < 2 {
		fail(errors.New("usage: loadgen serve|run [flags]"))
	}
	switch os.Args[1] {
	case "serve":
		serve(os.Args[2:])
	case "run":
		run(os.Args[2:])
	default:
		fail(fmt.Errorf("unknown command %q", os.Args[1]))
	}
}

func fail(err error) {
	line, _ := json.Marshal(map[string]any{"ok": false, "error": err.Error()})
	fmt.Println(string(line))
	os.Exit(1)
}

// ---------------------------------------------------------------------------------------------
// Backend

func serve(args []string) {
	fs := flag.NewFlagSet("serve", flag.ExitOnError)
	listen := fs.String("listen", "127.0.0.1:0", "address to listen on")
	udp := fs.Bool("udp", false, "a UDP echo instead of the TCP modes")
	_ = fs.Parse(args)
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}()
	if *udp {
		serveUDP(*listen)
		return
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fail(err)
	}
	fmt.Printf("listening on %s\n", ln.Addr())
	for {
		conn, err := ln.Accept()
		if err != nil {
			fail(err)
		}
		go handle(conn)
	}
}

func handle(conn net.Conn) {
	var mode [1]byte
	if _, err := io.ReadFull(conn, mode[:]); err != nil {
		conn.Close() // a readiness probe: connected and closed
		return
	}
	switch mode[0] {
	case 'E':
		_, _ = io.Copy(conn, conn)
		conn.Close()
	case 'D':
		var size [8]byte
		if _, err := io.ReadFull(conn, size[:]); err == nil {
			serveDownload(conn, int64(binary.BigEndian.Uint64(size[:])))
		}
		conn.Close()
	default:
		serveHTTP(conn, mode[0]) // the HTTP server closes it
	}
}

// serveDownload answers a 'D' request: `remaining` bytes of the pattern.
func serveDownload(conn net.Conn, remaining int64) {
	for pos := int64(0); pos < remaining; {
		n := int(min(remaining-pos, 60*1024))
		if _, err := conn.Write(patternAt(pos, n)); err != nil {
			return
		}
		pos += int64(n)
	}
}

// ---------------------------------------------------------------------------------------------
// Load

type options struct {
	target      string
	bytes       int64
	count       int
	concurrency int
	size        int
	rate        float64
	warmup      int
}

func run(args []string) {
	fs := flag.NewFlagSet("run", flag.ExitOnError)
	var o options
	fs.StringVar(&o.target, "target", "", "HOST:PORT to load (the tunnel's public side)")
	scenario := fs.String("scenario", "", "T1, T2, T3, T4, or U1 to U4 (UDP)")
	fs.Int64Var(&o.bytes, "bytes", 256<<20, "T1: bytes to download")
	fs.IntVar(&o.count, "count", 2000, "T2: connections; T3: round trips; T4: new connections")
	fs.IntVar(&o.concurrency, "concurrency", 16, "T2: connections at once")
	fs.IntVar(&o.size, "size", 64, "T2/T3: bytes per echo; T4: bytes sent before the first byte back; U: bytes per datagram")
	fs.Float64Var(&o.rate, "rate", 10000, "U3: datagrams per second offered")
	fs.IntVar(&o.warmup, "warmup", -1, "untimed repetitions first (-1: a default per scenario)")
	fs.StringVar(&httpHost, "http", "", "speak HTTP/1.1 with this Host (an HTTP tunnel's name)")
	handshake := fs.Bool("handshake", false, "after warm-up print {\"phase\":\"ready\"}, wait for a stdin line")
	timeout := fs.Duration("timeout", 300*time.Second, "give up after this long")
	_ = fs.Parse(args)
	if o.target == "" {
		fail(errors.New("-target is required"))
	}
	time.AfterFunc(*timeout, func() { fail(fmt.Errorf("timeout after %s", *timeout)) })
	ready := func() {
		if !*handshake {
			return
		}
		fmt.Println(`{"phase":"ready"}`)
		if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
			fail(fmt.Errorf("handshake: %w", err))
		}
	}
	var result map[string]any
	var err error
	switch *scenario {
	case "T1":
		result, err = bulk(o, ready)
	case "T2":
		result, err = connections(o, ready)
	case "T3":
		result, err = roundTrips(o, ready)
	case "T4":
		result, err = firstByte(o, ready)
	case "U1", "U2":
		result, err = udpRate(o, ready)
	case "U3":
		result, err = udpLoss(o, ready)
	case "U4":
		result, err = udpRoundTrips(o, ready)
	default:
		err = fmt.Errorf("unknown -scenario %q", *scenario)
	}
	if err != nil {
		fail(err)
	}
	result["ok"] = true
	result["scenario"] = *scenario
	line, _ := json.Marshal(result)
	fmt.Println(string(line))
}

func warmups(o options, fallback int) int {
	if o.warmup >= 0 {
		return o.warmup
	}
	return fallback
}

// download asks for n bytes and verifies them; it returns when the last one arrived.
func download(target string, n int64) error {
	if httpHost != "" {
		return httpDownload(target, n)
	}
	conn, err := net.Dial("tcp", target)
	if err != nil {
		return err
	}
	defer conn.Close()
	req := make([]byte, 9)
	req[0] = 'D'
	binary.BigEndian.PutUint64(req[1:], uint64(n))
	if _, err := conn.Write(req); err != nil {
		return err
	}
	return readPattern(conn, n)
}

// readPattern reads n bytes from r and checks them against the pattern.
func readPattern(r io.Reader, n int64) error {
	buf := make([]byte, readChunk)
	for pos := int64(0); pos < n; {
		k, err := r.Read(buf[:min(int64(len(buf)), n-pos)])
		if k > 0 && !bytes.Equal(buf[:k], patternAt(pos, k)) {
			return fmt.Errorf("T1: wrong bytes at offset %d", pos)
		}
		pos += int64(k)
		if err != nil && pos < n {
			return fmt.Errorf("T1: %d of %d bytes: %w", pos, n, err)
		}
	}
	return nil
}

// bulk (T1): one connection downloads o.bytes from the backend, verified.
func bulk(o options, ready func()) (map[string]any, error) {
	for i := 0; i < warmups(o, 1); i++ {
		if err := download(o.target, min(o.bytes, 16<<20)); err != nil {
			return nil, fmt.Errorf("warm-up: %w", err)
		}
	}
	ready()
	start := time.Now()
	if err := download(o.target, o.bytes); err != nil {
		return nil, err
	}
	secs := time.Since(start).Seconds()
	return map[string]any{"bytes": o.bytes, "seconds": secs, "mb_per_s": float64(o.bytes) / 1e6 / secs}, nil
}

// echoOnce: connect, send 'E' and size bytes, read them back, verify, close.
func echoOnce(target string, size int, seed int) error {
	if httpHost != "" {
		return httpEchoOnce(target, size, seed)
	}
	conn, err := net.Dial("tcp", target)
	if err != nil {
		return err
	}
	defer conn.Close()
	msg := make([]byte, 1+size)
	msg[0] = 'E'
	copy(msg[1:], patternAt(int64(seed), size))
	if _, err := conn.Write(msg); err != nil {
		return err
	}
	back := make([]byte, size)
	if _, err := io.ReadFull(conn, back); err != nil {
		return err
	}
	if !bytes.Equal(back, msg[1:]) {
		return errors.New("echo: wrong bytes")
	}
	return nil
}

// parallel runs count echoOnce calls on `workers` goroutines; the first error wins.
func parallel(o options, count int) error {
	var next atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	for w := 0; w < o.concurrency; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= count {
					return
				}
				if err := echoOnce(o.target, o.size, i); err != nil {
					once.Do(func() { firstErr = fmt.Errorf("connection %d: %w", i, err) })
					next.Store(int64(count)) // stop the others
					return
				}
			}
		}()
	}
	wg.Wait()
	return firstErr
}

// connections (T2): count short connections, concurrency at a time.
func connections(o options, ready func()) (map[string]any, error) {
	if err := parallel(o, warmups(o, 100)); err != nil {
		return nil, fmt.Errorf("warm-up: %w", err)
	}
	ready()
	start := time.Now()
	if err := parallel(o, o.count); err != nil {
		return nil, err
	}
	secs := time.Since(start).Seconds()
	return map[string]any{"connections": o.count, "seconds": secs, "conn_per_s": float64(o.count) / secs}, nil
}

func percentiles(samples []time.Duration) map[string]any {
	sort.Slice(samples, func(i, j int) bool { return samples[i] < samples[j] })
	at := func(q float64) float64 {
		i := int(q * float64(len(samples)-1))
		return float64(samples[i].Nanoseconds()) / 1e3
	}
	return map[string]any{"p50_us": at(0.5), "p99_us": at(0.99), "samples": len(samples)}
}

// roundTrips (T3): sequential size-byte round trips on one connection.
func roundTrips(o options, ready func()) (map[string]any, error) {
	if httpHost != "" {
		return httpRoundTrips(o, ready)
	}
	conn, err := net.Dial("tcp", o.target)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	if _, err := conn.Write([]byte{'E'}); err != nil {
		return nil, err
	}
	back := make([]byte, o.size)
	trip := func(i int) (time.Duration, error) {
		msg := patternAt(int64(i), o.size)
		start := time.Now()
		if _, err := conn.Write(msg); err != nil {
			return 0, err
		}
		if _, err := io.ReadFull(conn, back); err != nil {
			return 0, err
		}
		took := time.Since(start)
		if !bytes.Equal(back, msg) {
			return 0, fmt.Errorf("round trip %d: wrong bytes", i)
		}
		return took, nil
	}
	for i := 0; i < warmups(o, 200); i++ {
		if _, err := trip(i); err != nil {
			return nil, fmt.Errorf("warm-up: %w", err)
		}
	}
	ready()
	samples := make([]time.Duration, o.count)
	for i := range samples {
		if samples[i], err = trip(i); err != nil {
			return nil, err
		}
	}
	return percentiles(samples), nil
}

// firstByteOnce times one new connection: from before the dial until the first echoed byte of
// the size bytes sent right after connecting; then checks the rest and closes.
func firstByteOnce(target string, size int, seed int) (time.Duration, error) {
	if httpHost != "" {
		return httpFirstByteOnce(target, size, seed)
	}
	msg := make([]byte, 1+size)
	msg[0] = 'E'
	copy(msg[1:], patternAt(int64(seed), size))
	start := time.Now()
	conn, err := net.Dial("tcp", target)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	if _, err := conn.Write(msg); err != nil {
		return 0, err
	}
	back := make([]byte, size)
	k, err := conn.Read(back)
	took := time.Since(start)
	if k == 0 {
		return 0, fmt.Errorf("no first byte: %v", err)
	}
	if _, err := io.ReadFull(conn, back[k:]); err != nil {
		return 0, err
	}
	if !bytes.Equal(back, msg[1:]) {
		return 0, errors.New("first byte: wrong bytes")
	}
	return took, nil
}

// firstByte (T4): count sequential new connections, each timed by firstByteOnce.
func firstByte(o options, ready func()) (map[string]any, error) {
	for i := 0; i < warmups(o, 20); i++ {
		if _, err := firstByteOnce(o.target, o.size, i); err != nil {
			return nil, fmt.Errorf("warm-up: %w", err)
		}
	}
	ready()
	samples := make([]time.Duration, o.count)
	for i := range samples {
		var err error
		if samples[i], err = firstByteOnce(o.target, o.size, i); err != nil {
			return nil, fmt.Errorf("connection %d: %w", i, err)
		}
	}
	return percentiles(samples), nil
}
