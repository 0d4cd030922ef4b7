// Package peer holds the scenario and server logic shared by the Go yamux
// peers used for tunnelmux interop tests and benchmarks. Each peer program
// adapts one yamux library to the small Session/Stream interfaces below.
package peer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"sync"
	"time"
)

// Stream is the subset of a yamux stream the scenarios need.
type Stream interface {
	io.Reader
	io.Writer
	// CloseWrite half-closes: sends FIN, reading stays possible.
	CloseWrite() error
	// Close releases the stream after use (both directions done).
	Close() error
	// Reset aborts the stream with RST.
	Reset() error
	StreamID() uint32
	SetDeadline(t time.Time) error
}

// Session is the subset of a yamux session the scenarios need.
type Session interface {
	OpenStream(ctx context.Context) (Stream, error)
	AcceptStream() (Stream, error)
	Ping() (time.Duration, error)
	GoAway() error
	Close() error
	CloseChan() <-chan struct{}
}

// Options configures a session.
type Options struct {
	MaxWindow uint32        // max stream receive window; 0 = library default
	KeepAlive time.Duration // keepalive ping interval; 0 disables
	Backlog   int           // accept backlog / max inflight SYNs
	Log       io.Writer     // library log output
}

// Impl adapts one yamux library.
type Impl struct {
	Name          string // "hashicorp" | "goyamux"
	Module        string // Go module path, for version reporting
	ResetMethod   string // how Stream.Reset is implemented
	DefaultWindow uint32 // library default max stream window
	Client        func(conn *Tap, o Options) (Session, error)
	Server        func(conn *Tap, o Options) (Session, error)
	// IsRemoteGoAway reports whether err means the peer sent GoAway.
	IsRemoteGoAway func(err error) bool
	// IsStreamReset reports whether err means the stream was reset.
	IsStreamReset func(err error) bool
}

// Version returns the resolved version of the library module.
func (impl *Impl) Version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	for _, d := range bi.Deps {
		if d.Path == impl.Module {
			if d.Replace != nil {
				return d.Replace.Version
			}
			return d.Version
		}
	}
	return "unknown"
}

// ErrLocalReset is returned by adapters for I/O on a stream this side reset.
var ErrLocalReset = errors.New("stream reset locally")

var stdoutMu sync.Mutex

// emitJSON prints one JSON object as a single stdout line.
func emitJSON(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		b = []byte(fmt.Sprintf(`{"ok":false,"error":%q}`, err.Error()))
	}
	stdoutMu.Lock()
	defer stdoutMu.Unlock()
	os.Stdout.Write(append(b, '\n'))
}

func emitLine(s string) {
	stdoutMu.Lock()
	defer stdoutMu.Unlock()
	fmt.Fprintln(os.Stdout, s)
}

// Main parses the command line and runs a server or a client scenario.
func Main(impl Impl) {
	cfg, err := parseFlags(impl, os.Args[1:])
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", impl.Name, err)
		os.Exit(2)
	}
	if cfg.listen != "" {
		os.Exit(runServer(&impl, cfg))
	}
	os.Exit(runClient(&impl, cfg))
}
