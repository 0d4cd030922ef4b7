// HTTP through the tunnel: the same four scenarios as HTTP/1.1 requests carrying a Host header,
// for HTTP tunnels routed by name (tunnelmux's --http, frp's type = "http"). The backend answers
// HTTP on the same port as the raw modes (a request starts with a method, never 'E' or 'D'):
// GET /data?n=N answers N pattern bytes, POST /echo answers its body.

package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"sync"
	"time"
)

// httpHost is the Host of every request when the load speaks HTTP (-http), else "".
var httpHost string

// ---- backend ----

// peekedConn gives back the mode byte handle() read before it knew the connection was HTTP.
type peekedConn struct {
	net.Conn
	reader *bufio.Reader
}

func (c peekedConn) Read(p []byte) (int, error) { return c.reader.Read(p) }

// connListener feeds handle()'s HTTP connections to one http.Server.
type connListener struct {
	conns chan net.Conn
	addr  net.Addr
}

func (l *connListener) Accept() (net.Conn, error) { return <-l.conns, nil }
func (l *connListener) Close() error              { return nil }
func (l *connListener) Addr() net.Addr            { return l.addr }

var httpBackend struct {
	once     sync.Once
	listener *connListener
}

func serveHTTP(conn net.Conn, first byte) {
	httpBackend.once.Do(func() {
		httpBackend.listener = &connListener{conns: make(chan net.Conn), addr: conn.LocalAddr()}
		mux := http.NewServeMux()
		mux.HandleFunc("/data", func(w http.ResponseWriter, r *http.Request) {
			n, err := strconv.ParseInt(r.URL.Query().Get("n"), 10, 64)
			if err != nil || n < 0 {
				http.Error(w, "n?", http.StatusBadRequest)
				return
			}
			w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
			for pos := int64(0); pos < n; {
				k := int(min(n-pos, 60*1024))
				if _, err := w.Write(patternAt(pos, k)); err != nil {
					return
				}
				pos += int64(k)
			}
		})
		mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				return
			}
			w.Header().Set("Content-Length", strconv.Itoa(len(body)))
			_, _ = w.Write(body)
		})
		go func() { _ = http.Serve(httpBackend.listener, mux) }()
	})
	reader := bufio.NewReader(io.MultiReader(bytes.NewReader([]byte{first}), conn))
	httpBackend.listener.conns <- peekedConn{Conn: conn, reader: reader}
}

// ---- load ----

func httpClient(target string, keepAlive bool) *http.Client {
	dialer := &net.Dialer{}
	transport := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return dialer.DialContext(ctx, "tcp", target)
		},
		DisableKeepAlives:  !keepAlive,
		DisableCompression: true,
	}
	if keepAlive {
		// T3: every request on the one connection.
		transport.MaxConnsPerHost = 1
		transport.MaxIdleConnsPerHost = 1
	}
	return &http.Client{Transport: transport}
}

func httpRequest(method, path string, body []byte) *http.Request {
	req, _ := http.NewRequest(method, "http://"+httpHost+path, bytes.NewReader(body))
	req.Host = httpHost
	return req
}

func httpDownload(target string, n int64) error {
	client := httpClient(target, false)
	resp, err := client.Do(httpRequest("GET", "/data?n="+strconv.FormatInt(n, 10), nil))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("T1: HTTP %d", resp.StatusCode)
	}
	return readPattern(resp.Body, n)
}

// httpEcho posts size bytes on client (a new connection unless it keeps them) and checks the echo.
func httpEcho(client *http.Client, size int, seed int) error {
	msg := patternAt(int64(seed), size)
	resp, err := client.Do(httpRequest("POST", "/echo", msg))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	back, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != 200 || !bytes.Equal(back, msg) {
		return fmt.Errorf("echo: HTTP %d, %d bytes back", resp.StatusCode, len(back))
	}
	return nil
}

var shortClients sync.Map // target → *http.Client without keep-alive

func httpEchoOnce(target string, size int, seed int) error {
	client, _ := shortClients.LoadOrStore(target, httpClient(target, false))
	return httpEcho(client.(*http.Client), size, seed)
}

// httpRoundTrips (T3 over HTTP): sequential echoes on one kept-alive connection.
func httpRoundTrips(o options, ready func()) (map[string]any, error) {
	client := httpClient(o.target, true)
	for i := 0; i < warmups(o, 200); i++ {
		if err := httpEcho(client, o.size, i); err != nil {
			return nil, fmt.Errorf("warm-up: %w", err)
		}
	}
	ready()
	samples := make([]time.Duration, o.count)
	for i := range samples {
		start := time.Now()
		if err := httpEcho(client, o.size, i); err != nil {
			return nil, fmt.Errorf("round trip %d: %w", i, err)
		}
		samples[i] = time.Since(start)
	}
	return percentiles(samples), nil
}

// httpFirstByteOnce (T4 over HTTP): from before the dial to the response's first byte.
func httpFirstByteOnce(target string, size int, seed int) (time.Duration, error) {
	client, _ := shortClients.LoadOrStore(target, httpClient(target, false))
	msg := patternAt(int64(seed), size)
	var first time.Time
	req := httpRequest("POST", "/echo", msg)
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
		GotFirstResponseByte: func() { first = time.Now() },
	}))
	start := time.Now()
	resp, err := client.(*http.Client).Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	back, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	if first.IsZero() || !bytes.Equal(back, msg) {
		return 0, errors.New("first byte: wrong answer")
	}
	return first.Sub(start), nil
}
