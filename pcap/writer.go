package pcap

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"sync"
	"time"
)

// pcapng block types and constants (draft-ietf-opsawg-pcapng).
const (
	blockSHB = 0x0A0D0D0A
	blockIDB = 0x00000001
	blockSPB = 0x00000003
	blockEPB = 0x00000006
	blockDSB = 0x0000000A

	byteOrderMagic = 0x1A2B3C4D

	// SecretsTypeTLS marks a Decryption Secrets Block holding an NSS key log.
	SecretsTypeTLS = 0x544c534b // "TLSK"

	// LinkTypeRaw is LINKTYPE_RAW: each packet starts with an IPv4 or IPv6 header.
	LinkTypeRaw = 101

	optEndOfOpt   = 0
	optShbUserApp = 4
	optIfName     = 2
	optIfTsresol  = 9
	optIfTsoffset = 14

	// maxBlockLen bounds what the reader allocates for one block.
	maxBlockLen = 16 << 20
)

// Options tune a Writer.
type Options struct {
	// SnapLen, when positive, keeps at most this many bytes of each packet
	// (IP and UDP headers included); the original length is still recorded.
	// Header-only captures for measurements use 128.
	SnapLen int
	// SecretsFirst holds packets in memory until Close and then writes the
	// secrets before them. Wireshark only applies a Decryption Secrets Block
	// to the packets after it, and the secrets of a connection are known
	// only once its handshake has run, so a live capture that wants
	// every packet decryptable should set this. Without it, blocks are
	// written in call order.
	SecretsFirst bool
	// Application is recorded in the section header; empty means "quiver".
	Application string
	// Spool, with SecretsFirst, holds the packets back in this file (from
	// its current offset) instead of in memory, so that a long capture
	// costs no memory; Close copies them out. The caller removes it.
	Spool io.ReadWriteSeeker
}

// Writer writes a pcapng capture of UDP datagrams. It is safe for
// concurrent use, since an emulated link stamps packets from both
// directions.
type Writer struct {
	mu      sync.Mutex
	w       io.Writer
	opts    Options
	pending bytes.Buffer // packet blocks held back when SecretsFirst
	// spoolStart and spooled locate the held-back blocks in Options.Spool.
	spoolStart, spooled int64
	secrets             [][]byte // held back when SecretsFirst
	scratch             []byte
	block               []byte
	err                 error
	closed              bool
}

var le = binary.LittleEndian // the writer's byte order; the SHB says so

// NewWriter starts a capture on w, writing the section header and the
// interface description at once. Blocks are written in call order.
func NewWriter(w io.Writer) (*Writer, error) { return NewWriterOptions(w, Options{}) }

// NewWriterOptions starts a capture on w with the given options.
func NewWriterOptions(w io.Writer, opts Options) (*Writer, error) {
	if opts.Application == "" {
		opts.Application = "quiver"
	}
	pw := &Writer{w: w, opts: opts}
	if !opts.SecretsFirst {
		if err := pw.writeHead(nil); err != nil {
			return nil, err
		}
	}
	return pw, nil
}

// writeHead writes the section header, the interface description and the
// given secrets. The interface comes before the secrets although pcapng
// allows either order: Wireshark learns a file's link type from the
// interface blocks right after the section header, and editcap refuses
// files where a secrets block comes first.
func (w *Writer) writeHead(secrets [][]byte) error {
	b := w.block[:0]
	b = appendSHB(b, w.opts.Application)
	b = appendIDB(b, w.opts.SnapLen)
	for _, s := range secrets {
		b = appendDSB(b, s)
	}
	w.block = b
	return w.write(b)
}

func (w *Writer) write(b []byte) error {
	if _, err := w.w.Write(b); err != nil {
		w.err = fmt.Errorf("pcap: %w", err)
	}
	return w.err
}

// WriteSecrets embeds a TLS key log (NSS key log text) in a Decryption
// Secrets Block. Without SecretsFirst, it applies to the packets written
// after it only.
func (w *Writer) WriteSecrets(keylog []byte) error {
	if len(keylog) == 0 {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.usable(); err != nil {
		return err
	}
	if w.opts.SecretsFirst {
		w.secrets = append(w.secrets, bytes.Clone(keylog))
		return nil
	}
	w.block = appendDSB(w.block[:0], keylog)
	return w.write(w.block)
}

// WriteDatagram records a UDP datagram from src to dst seen at t.
func (w *Writer) WriteDatagram(t time.Time, src, dst netip.AddrPort, payload []byte) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.usable(); err != nil {
		return err
	}
	pkt, err := appendIPUDP(w.scratch[:0], src, dst, payload)
	w.scratch = pkt
	if err != nil {
		return err
	}
	capLen := len(pkt)
	if w.opts.SnapLen > 0 && capLen > w.opts.SnapLen {
		capLen = w.opts.SnapLen
	}
	w.block = appendEPB(w.block[:0], t, pkt[:capLen], len(pkt))
	if w.opts.SecretsFirst {
		if w.opts.Spool != nil {
			return w.spool(w.block)
		}
		w.pending.Write(w.block)
		return nil
	}
	return w.write(w.block)
}

func (w *Writer) usable() error {
	if w.err != nil {
		return w.err
	}
	if w.closed {
		return errors.New("pcap: writer is closed")
	}
	return nil
}

// Close finishes the capture: with SecretsFirst it writes everything held
// back. It does not close the underlying writer.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return w.err
	}
	w.closed = true
	if w.err != nil || !w.opts.SecretsFirst {
		return w.err
	}
	if err := w.writeHead(w.secrets); err != nil {
		return err
	}
	w.secrets = nil
	if sp := w.opts.Spool; sp != nil {
		if _, err := sp.Seek(w.spoolStart, io.SeekStart); err != nil {
			w.err = fmt.Errorf("pcap: spool: %w", err)
			return w.err
		}
		if _, err := io.CopyN(w.w, sp, w.spooled); err != nil {
			w.err = fmt.Errorf("pcap: spool: %w", err)
		}
		return w.err
	}
	if _, err := w.pending.WriteTo(w.w); err != nil {
		w.err = fmt.Errorf("pcap: %w", err)
	}
	return w.err
}

// spool appends a held-back block to the spool file.
func (w *Writer) spool(b []byte) error {
	if w.spooled == 0 {
		off, err := w.opts.Spool.Seek(0, io.SeekCurrent)
		if err != nil {
			w.err = fmt.Errorf("pcap: spool: %w", err)
			return w.err
		}
		w.spoolStart = off
	}
	n, err := w.opts.Spool.Write(b)
	w.spooled += int64(n)
	if err != nil {
		w.err = fmt.Errorf("pcap: spool: %w", err)
	}
	return w.err
}

// beginBlock appends a block header whose length is fixed by endBlock.
func beginBlock(b []byte, typ uint32) ([]byte, int) {
	start := len(b)
	b = le.AppendUint32(b, typ)
	b = le.AppendUint32(b, 0)
	return b, start
}

func endBlock(b []byte, start int) []byte {
	n := uint32(len(b) - start + 4)
	le.PutUint32(b[start+4:], n)
	return le.AppendUint32(b, n)
}

func pad4(b []byte) []byte {
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

func appendOption(b []byte, code uint16, v []byte) []byte {
	b = le.AppendUint16(b, code)
	b = le.AppendUint16(b, uint16(len(v)))
	return pad4(append(b, v...))
}

func appendSHB(b []byte, app string) []byte {
	b, s := beginBlock(b, blockSHB)
	b = le.AppendUint32(b, byteOrderMagic)
	b = le.AppendUint16(b, 1) // major version
	b = le.AppendUint16(b, 0) // minor version
	b = le.AppendUint64(b, ^uint64(0))
	b = appendOption(b, optShbUserApp, []byte(app))
	b = appendOption(b, optEndOfOpt, nil)
	return endBlock(b, s)
}

func appendIDB(b []byte, snapLen int) []byte {
	b, s := beginBlock(b, blockIDB)
	b = le.AppendUint16(b, LinkTypeRaw)
	b = le.AppendUint16(b, 0)
	if snapLen <= 0 {
		snapLen = 0 // no limit
	}
	b = le.AppendUint32(b, uint32(snapLen))
	b = appendOption(b, optIfName, []byte("udp"))
	b = appendOption(b, optIfTsresol, []byte{9}) // 10^-9 s: nanoseconds
	b = appendOption(b, optEndOfOpt, nil)
	return endBlock(b, s)
}

func appendDSB(b []byte, secrets []byte) []byte {
	b, s := beginBlock(b, blockDSB)
	b = le.AppendUint32(b, SecretsTypeTLS)
	b = le.AppendUint32(b, uint32(len(secrets)))
	b = pad4(append(b, secrets...))
	return endBlock(b, s)
}

func appendEPB(b []byte, t time.Time, data []byte, origLen int) []byte {
	b, s := beginBlock(b, blockEPB)
	ts := uint64(t.UnixNano())
	b = le.AppendUint32(b, 0) // interface 0
	b = le.AppendUint32(b, uint32(ts>>32))
	b = le.AppendUint32(b, uint32(ts))
	b = le.AppendUint32(b, uint32(len(data)))
	b = le.AppendUint32(b, uint32(origLen))
	b = pad4(append(b, data...))
	return endBlock(b, s)
}
