package peer

import (
	"errors"
	"fmt"
	"io"
)

type readerOnly struct{ io.Reader }
type writerOnly struct{ io.Writer }

// echo copies st back to itself until EOF, then half-closes. With limit > 0
// a stream that reaches limit bytes is reset instead (shorter ones end
// normally).
func echo(st Stream, limit int64) (int64, error) {
	buf := make([]byte, 32*1024)
	var n int64
	var err error
	var src io.Reader = readerOnly{st}
	if limit > 0 {
		src = io.LimitReader(src, limit)
	}
	n, err = io.CopyBuffer(writerOnly{st}, src, buf)
	if err == nil && limit > 0 && n == limit {
		// Limit reached (the peer may have more to send): reset.
		if err = st.Reset(); err == nil {
			err = errResetByServer
		}
		return n, err
	}
	if err != nil {
		_ = st.Close()
		return n, err
	}
	if err = st.CloseWrite(); err != nil {
		return n, err
	}
	_ = st.Close()
	return n, nil
}

var errResetByServer = errors.New("reset by -rst-after")

// transferResult describes one write+read-back exchange.
type transferResult struct {
	written int64
	read    int64
	readErr error // nil on clean EOF after exactly n bytes
	wErr    error
}

func (r transferResult) err() error {
	if r.readErr != nil {
		return r.readErr
	}
	if r.wErr != nil {
		return fmt.Errorf("write: %w", r.wErr)
	}
	return nil
}

// transfer writes n payload bytes (pattern offset off) in chunk-sized writes,
// half-closes, and concurrently reads the echo until EOF, verifying every
// byte when verify is set.
func transfer(st Stream, pat *Pattern, off, n int64, chunk int, verify bool) transferResult {
	var res transferResult
	wdone := make(chan struct{})
	go func() {
		defer close(wdone)
		var pos int64
		for pos < n {
			seg := pat.Segment(off, pos, int(min(int64(chunk), n-pos)))
			w, err := st.Write(seg)
			pos += int64(w)
			if err != nil {
				res.wErr = err
				res.written = pos
				return
			}
		}
		res.written = pos
		res.wErr = st.CloseWrite()
	}()
	buf := make([]byte, 64*1024)
	var got int64
	for {
		k, err := st.Read(buf)
		if k > 0 {
			if got+int64(k) > n {
				res.readErr = fmt.Errorf("echo longer than sent: %d > %d bytes", got+int64(k), n)
				break
			}
			if verify && !pat.Verify(off, got, buf[:k]) {
				res.readErr = fmt.Errorf("echo mismatch in bytes [%d,%d)", got, got+int64(k))
				break
			}
			got += int64(k)
		}
		if err == io.EOF {
			if got != n {
				res.readErr = fmt.Errorf("echo short: EOF after %d of %d bytes", got, n)
			}
			break
		}
		if err != nil {
			res.readErr = fmt.Errorf("read after %d of %d bytes: %w", got, n, err)
			break
		}
	}
	res.read = got
	if res.readErr != nil {
		_ = st.Reset() // unblock the writer
	}
	<-wdone
	if res.readErr == nil {
		_ = st.Close()
	}
	return res
}
