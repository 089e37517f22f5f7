package protect

import (
	"crypto/aes"
	"crypto/cipher"
	"encoding/binary"
	"fmt"

	"golang.org/x/crypto/chacha20"
)

// HeaderProtector applies and removes QUIC header protection (RFC 9001
// §5.4) with the header protection key of one direction and encryption
// level: AES-ECB for the AES-GCM suites (§5.4.3), raw ChaCha20 for the
// ChaCha20-Poly1305 suite (§5.4.4).
//
// It keeps a mask scratch buffer and must not be used concurrently.
type HeaderProtector struct {
	block     cipher.Block // AES suites
	chachaKey [32]byte     // ChaCha20 suite
	chacha    bool
	mask      [16]byte
}

// NewHeaderProtector returns a header protector for a raw header protection
// key: AES-128 or AES-256 for a 16- or 32-byte key, or ChaCha20 when chacha
// is set (the key is then 32 bytes).
func NewHeaderProtector(key []byte, chacha bool) (*HeaderProtector, error) {
	return newHeaderProtector(key, chacha)
}

func newHeaderProtector(key []byte, chacha bool) (*HeaderProtector, error) {
	h := &HeaderProtector{chacha: chacha}
	if chacha {
		if len(key) != chacha20.KeySize {
			return nil, fmt.Errorf("protect: ChaCha20 header protection key of %d bytes, want %d", len(key), chacha20.KeySize)
		}
		copy(h.chachaKey[:], key)
		return h, nil
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("protect: AES header protection key: %w", err)
	}
	h.block = block
	return h, nil
}

// computeMask fills h.mask[:5] from a 16-byte sample.
func (h *HeaderProtector) computeMask(sample []byte) {
	if !h.chacha {
		// RFC 9001 §5.4.3: "mask = AES-ECB(hp_key, sample)".
		h.block.Encrypt(h.mask[:], sample[:SampleSize])
		return
	}
	// RFC 9001 §5.4.4:
	//   counter = sample[0..3]
	//   nonce = sample[4..15]
	//   mask = ChaCha20(hp_key, counter, nonce, {0,0,0,0,0})
	// "The first 4 bytes of the sampled ciphertext are the block counter. A
	// ChaCha20 implementation could take a 32-bit integer in place of a byte
	// sequence, in which case, the byte sequence is interpreted as a
	// little-endian value."
	c, err := chacha20.NewUnauthenticatedCipher(h.chachaKey[:], sample[4:SampleSize])
	if err != nil {
		panic("protect: ChaCha20 header protection: " + err.Error())
	}
	// A fresh cipher starts at counter 0, so SetCounter never rolls back, and
	// five bytes fit in the block at counter 0xffffffff without overflow.
	c.SetCounter(binary.LittleEndian.Uint32(sample[:4]))
	clear(h.mask[:5])
	c.XORKeyStream(h.mask[:5], h.mask[:5])
}

// firstByteMask returns which bits of the first byte header protection
// covers. RFC 9001 §5.4.1:
//
//	if (packet[0] & 0x80) == 0x80:
//	   # Long header: 4 bits masked
//	   packet[0] ^= mask[0] & 0x0f
//	else:
//	   # Short header: 5 bits masked
//	   packet[0] ^= mask[0] & 0x1f
func firstByteMask(long bool) byte {
	if long {
		return 0x0f
	}
	return 0x1f
}

// sampleCheck validates pnOffset and the sample position. RFC 9001 §5.4.2:
// "sample_offset = pn_offset + 4"; the sample is SampleSize bytes.
func sampleCheck(pkt []byte, pnOffset int) error {
	if pnOffset < 1 || pnOffset > len(pkt) {
		return ErrPacketNumberOffset
	}
	if len(pkt)-pnOffset < 4+SampleSize {
		return ErrSampleTooShort
	}
	return nil
}

// Apply protects the header of pkt in place. pkt starts at the packet's
// first byte and holds at least the sampled ciphertext; pnOffset is the
// offset of the Packet Number field, and long tells the header form. The
// packet number length comes from the still unprotected first byte; Apply
// returns it. pkt must not be shorter than pnOffset+4+SampleSize
// (ErrSampleTooShort).
func (h *HeaderProtector) Apply(pkt []byte, pnOffset int, long bool) (pnLen int, err error) {
	if err := sampleCheck(pkt, pnOffset); err != nil {
		return 0, err
	}
	// RFC 9001 §5.4.1: "pn_length = (packet[0] & 0x03) + 1" is read before
	// the first byte is masked.
	pnLen = int(pkt[0]&0x03) + 1
	h.computeMask(pkt[pnOffset+4:])
	pkt[0] ^= h.mask[0] & firstByteMask(long)
	// RFC 9001 §5.4.1: "packet[pn_offset:pn_offset+pn_length] ^=
	// mask[1:1+pn_length]".
	for i := 0; i < pnLen; i++ {
		pkt[pnOffset+i] ^= h.mask[1+i]
	}
	return pnLen, nil
}

// Remove removes header protection from pkt in place, with the same
// arguments as Apply, and returns the packet number length read from the
// unprotected first byte. The packet number bytes pkt[pnOffset:pnOffset+pnLen]
// are then in the clear.
//
// RFC 9001 §5.4.2: "An endpoint MUST discard packets that are not long
// enough to contain a complete sample"; Remove reports them as
// ErrSampleTooShort and leaves pkt untouched.
func (h *HeaderProtector) Remove(pkt []byte, pnOffset int, long bool) (pnLen int, err error) {
	if err := sampleCheck(pkt, pnOffset); err != nil {
		return 0, err
	}
	h.computeMask(pkt[pnOffset+4:])
	pkt[0] ^= h.mask[0] & firstByteMask(long)
	pnLen = int(pkt[0]&0x03) + 1
	for i := 0; i < pnLen; i++ {
		pkt[pnOffset+i] ^= h.mask[1+i]
	}
	return pnLen, nil
}

// Mask returns the five-byte header protection mask for a sample of
// SampleSize bytes, for probes that build or corrupt headers by hand.
func (h *HeaderProtector) Mask(sample []byte) ([5]byte, error) {
	if len(sample) < SampleSize {
		return [5]byte{}, ErrSampleTooShort
	}
	h.computeMask(sample)
	return [5]byte(h.mask[:5]), nil
}
