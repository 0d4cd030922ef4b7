// UDP: the backend's echo (serve -udp) and the U scenarios' load. Each datagram is an 8-byte
// big-endian sequence number and then the pattern from that number on, so every reply is checked
// and counted once; a datagram that does not come back is lost, never waited for without bound.
package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// udpSocketBuffer is asked of the kernel for each UDP socket, so a burst is not lost in the
// load's or the backend's own socket rather than in the tunnel.
const udpSocketBuffer = 4 << 20

// lossWait is how long the load waits for replies after its last send, once none comes.
const lossWait = 500 * time.Millisecond

// serveUDP echoes every datagram to its sender until the process exits.
func serveUDP(listen string) {
	addr, err := net.ResolveUDPAddr("udp", listen)
	if err != nil {
		fail(err)
	}
	conn, err := net.ListenUDP("udp", addr)
	if err != nil {
		fail(err)
	}
	_ = conn.SetReadBuffer(udpSocketBuffer)
	_ = conn.SetWriteBuffer(udpSocketBuffer)
	fmt.Printf("listening on %s\n", conn.LocalAddr())
	buf := make([]byte, 65536)
	for {
		n, from, err := conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			fail(err)
		}
		_, _ = conn.WriteToUDPAddrPort(buf[:n], from)
	}
}

// datagram builds datagram seq of size bytes (at least 8) into buf.
func datagram(buf []byte, seq uint64, size int) []byte {
	binary.BigEndian.PutUint64(buf, seq)
	copy(buf[8:size], patternAt(int64(seq), size-8))
	return buf[:size]
}

// udpCounter reads replies on conn, checks them, and counts each sequence number once.
type udpCounter struct {
	conn     *net.UDPConn
	size     int
	seen     []atomic.Bool
	received atomic.Int64
	bad      atomic.Int64
	last     atomic.Int64 // unix ns of the last good reply
	replies  chan struct{}
	done     sync.WaitGroup
}

func newUDPCounter(conn *net.UDPConn, size, count int) *udpCounter {
	c := &udpCounter{conn: conn, size: size, seen: make([]atomic.Bool, count), replies: make(chan struct{}, 1)}
	c.done.Add(1)
	go func() {
		defer c.done.Done()
		buf := make([]byte, 65536)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				return // closed
			}
			if n != size || n < 8 {
				c.bad.Add(1)
				continue
			}
			seq := binary.BigEndian.Uint64(buf)
			if seq >= uint64(count) || !bytes.Equal(buf[8:n], patternAt(int64(seq), n-8)) {
				c.bad.Add(1)
				continue
			}
			if c.seen[seq].Swap(true) {
				continue // a duplicate: counted once
			}
			c.received.Add(1)
			c.last.Store(time.Now().UnixNano())
			select {
			case c.replies <- struct{}{}:
			default:
			}
		}
	}()
	return c
}

// drain waits until all `sent` came back or none came for lossWait.
func (c *udpCounter) drain(sent int64) {
	for c.received.Load() < sent {
		select {
		case <-c.replies:
		case <-time.After(lossWait):
			return
		}
	}
}

func (c *udpCounter) close() {
	c.conn.Close()
	c.done.Wait()
}

func dialUDP(target string) (*net.UDPConn, error) {
	addr, err := net.ResolveUDPAddr("udp", target)
	if err != nil {
		return nil, err
	}
	conn, err := net.DialUDP("udp", nil, addr)
	if err != nil {
		return nil, err
	}
	_ = conn.SetReadBuffer(udpSocketBuffer)
	_ = conn.SetWriteBuffer(udpSocketBuffer)
	return conn, nil
}

// udpWarmup sends n datagrams one at a time (waiting up to lossWait for each): the tunnel opens
// its flow and the path is warm before the timed part.
func udpWarmup(target string, size, n int) error {
	if n == 0 {
		return nil
	}
	conn, err := dialUDP(target)
	if err != nil {
		return err
	}
	c := newUDPCounter(conn, size, n)
	defer c.close()
	buf := make([]byte, size)
	for i := 0; i < n; i++ {
		if _, err := conn.Write(datagram(buf, uint64(i), size)); err != nil {
			return err
		}
		c.drain(int64(i + 1))
	}
	if c.received.Load() == 0 {
		return errors.New("no datagram came back")
	}
	return nil
}

// udpRate (U1, U2): count datagrams of size bytes echoed with at most `concurrency` in flight;
// a window slot whose reply has not come for 50 ms is given up as lost. Datagrams per second is
// what came back over the time from the first send to the last reply.
func udpRate(o options, ready func()) (map[string]any, error) {
	if o.size < 8 {
		return nil, errors.New("-size must be at least 8 for UDP")
	}
	if err := udpWarmup(o.target, o.size, warmups(o, 20)); err != nil {
		return nil, fmt.Errorf("warm-up: %w", err)
	}
	conn, err := dialUDP(o.target)
	if err != nil {
		return nil, err
	}
	c := newUDPCounter(conn, o.size, o.count)
	defer c.close()
	buf := make([]byte, o.size)
	ready()
	start := time.Now()
	var given int64 // slots given up as lost
	for i := 0; i < o.count; i++ {
		for int64(i)-c.received.Load()-given >= int64(o.concurrency) {
			select {
			case <-c.replies:
			case <-time.After(50 * time.Millisecond):
				given++
			}
		}
		if _, err := conn.Write(datagram(buf, uint64(i), o.size)); err != nil {
			return nil, err
		}
	}
	c.drain(int64(o.count))
	received := c.received.Load()
	if received == 0 {
		return nil, errors.New("no datagram came back")
	}
	secs := time.Unix(0, c.last.Load()).Sub(start).Seconds()
	return map[string]any{
		"datagrams":   o.count,
		"received":    received,
		"bad":         c.bad.Load(),
		"seconds":     secs,
		"dgram_per_s": float64(received) / secs,
		"mb_per_s":    float64(received) * float64(o.size) / 1e6 / secs,
		"loss_pct":    100 * float64(int64(o.count)-received) / float64(o.count),
	}, nil
}

// udpLoss (U3): count datagrams of size bytes offered at `rate` per second, paced, whatever comes
// back; the share that did not come back is the loss.
func udpLoss(o options, ready func()) (map[string]any, error) {
	if o.size < 8 || o.rate <= 0 {
		return nil, errors.New("-size must be at least 8 and -rate positive for U3")
	}
	if err := udpWarmup(o.target, o.size, warmups(o, 20)); err != nil {
		return nil, fmt.Errorf("warm-up: %w", err)
	}
	conn, err := dialUDP(o.target)
	if err != nil {
		return nil, err
	}
	c := newUDPCounter(conn, o.size, o.count)
	defer c.close()
	buf := make([]byte, o.size)
	ready()
	start := time.Now()
	for i := 0; i < o.count; i++ {
		// Paced in bursts of what is due: a sleep per datagram would be coarser than the rate.
		if due := start.Add(time.Duration(float64(i) / o.rate * float64(time.Second))); time.Now().Before(due) {
			time.Sleep(time.Until(due))
		}
		if _, err := conn.Write(datagram(buf, uint64(i), o.size)); err != nil {
			return nil, err
		}
	}
	offeredSecs := time.Since(start).Seconds()
	c.drain(int64(o.count))
	received := c.received.Load()
	return map[string]any{
		"datagrams":       o.count,
		"received":        received,
		"bad":             c.bad.Load(),
		"offered_per_s":   float64(o.count) / offeredSecs,
		"loss_pct":        100 * float64(int64(o.count)-received) / float64(o.count),
		"delivered_per_s": float64(received) / offeredSecs,
	}, nil
}

// udpRoundTrips (U4): count sequential round trips of size bytes; one whose reply does not come
// within a second is lost (and not a sample).
func udpRoundTrips(o options, ready func()) (map[string]any, error) {
	if o.size < 8 {
		return nil, errors.New("-size must be at least 8 for UDP")
	}
	if err := udpWarmup(o.target, o.size, warmups(o, 50)); err != nil {
		return nil, fmt.Errorf("warm-up: %w", err)
	}
	conn, err := dialUDP(o.target)
	if err != nil {
		return nil, err
	}
	c := newUDPCounter(conn, o.size, o.count)
	defer c.close()
	buf := make([]byte, o.size)
	ready()
	samples := make([]time.Duration, 0, o.count)
	lost := 0
	for i := 0; i < o.count; i++ {
		start := time.Now()
		if _, err := conn.Write(datagram(buf, uint64(i), o.size)); err != nil {
			return nil, err
		}
		timer := time.NewTimer(time.Second)
		got := false
		for !got {
			select {
			case <-c.replies:
				got = c.seen[i].Load()
			case <-timer.C:
				lost++
				got = true
				start = time.Time{}
			}
		}
		timer.Stop()
		if !start.IsZero() {
			samples = append(samples, time.Since(start))
		}
	}
	if len(samples) == 0 {
		return nil, errors.New("no round trip came back")
	}
	result := percentiles(samples)
	result["loss_pct"] = 100 * float64(lost) / float64(o.count)
	return result, nil
}
