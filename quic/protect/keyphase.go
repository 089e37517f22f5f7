package protect

import "errors"

// KeyPhase manages the 1-RTT keys of a connection across key updates
// (RFC 9001 §6). It holds the current read and write keys, the next
// generation of the read keys (precomputed, so that a key update costs no
// derivation at the time a packet arrives) and the previous read keys, so
// that packets of the old phase that arrive late can still be opened. The
// next write keys are derived when an update happens: sending reveals no
// timing of a received packet, and an idle connection keeps one AEAD less.
//
// RFC 9001 §6.3: "endpoints ... generate the next set of packet protection
// keys ... in advance" and §6.5: "An endpoint ... SHOULD retain old keys for
// some time after receiving a packet protected using the current keys".
//
// The zero value is ready: install the secrets with InstallRead and
// InstallWrite as crypto/tls reports them for tls.QUICEncryptionLevelApplication.
// The engine enforces the rules about when an update may start (§6.1: not
// before the handshake is confirmed, not again before an acknowledgment of a
// packet of the current phase); KeyPhase only does the key bookkeeping.
type KeyPhase struct {
	phase      uint8 // current Key Phase bit, 0 or 1
	generation uint64

	read, nextRead, prevRead *Keys
	write                    *Keys

	// firstPN is the lowest packet number opened with the current read
	// keys; it tells reordered old-phase packets from a new update.
	firstPN   uint64
	haveFirst bool
}

// errNoKeys is returned when 1-RTT keys are used before they are installed.
var errNoKeys = errors.New("protect: 1-RTT keys not installed")

// InstallRead installs the first 1-RTT read keys from the secret crypto/tls
// reports in a QUICSetReadSecret event, and precomputes the next phase.
func (p *KeyPhase) InstallRead(version uint32, suite uint16, secret []byte) error {
	k, next, err := keysAndNext(version, suite, secret)
	if err != nil {
		return err
	}
	p.read, p.nextRead, p.prevRead = k, next, nil
	return nil
}

// InstallWrite installs the first 1-RTT write keys from the secret crypto/tls
// reports in a QUICSetWriteSecret event.
func (p *KeyPhase) InstallWrite(version uint32, suite uint16, secret []byte) error {
	k, err := NewKeys(version, suite, secret)
	if err != nil {
		return err
	}
	p.write = k
	return nil
}

// keysAndNext derives the keys of a secret and of the key phase after it.
func keysAndNext(version uint32, suite uint16, secret []byte) (k, next *Keys, err error) {
	if k, err = NewKeys(version, suite, secret); err != nil {
		return nil, nil, err
	}
	if next, err = k.Next(); err != nil {
		return nil, nil, err
	}
	return k, next, nil
}

// Phase returns the current Key Phase bit (0 or 1) to put in short headers.
func (p *KeyPhase) Phase() uint8 { return p.phase }

// Generation returns how many key updates have happened.
func (p *KeyPhase) Generation() uint64 { return p.generation }

// Read returns the current read keys (nil before InstallRead).
func (p *KeyPhase) Read() *Keys { return p.read }

// Write returns the current write keys (nil before InstallWrite).
func (p *KeyPhase) Write() *Keys { return p.write }

// NextRead returns the precomputed read keys of the next phase.
func (p *KeyPhase) NextRead() *Keys { return p.nextRead }

// PreviousRead returns the read keys of the previous phase, or nil when
// there are none or they have been discarded.
func (p *KeyPhase) PreviousRead() *Keys { return p.prevRead }

// ReadHeader returns the header protector for received 1-RTT packets; key
// updates do not change it.
func (p *KeyPhase) ReadHeader() *HeaderProtector {
	if p.read == nil {
		return nil
	}
	return p.read.hp
}

// WriteHeader returns the header protector for sent 1-RTT packets.
func (p *KeyPhase) WriteHeader() *HeaderProtector {
	if p.write == nil {
		return nil
	}
	return p.write.hp
}

// Seal protects a 1-RTT payload with the current write keys (see
// Keys.Seal). The header must already carry Phase() in its Key Phase bit,
// and InstallWrite must have been called.
func (p *KeyPhase) Seal(dst, header, payload []byte, pn uint64) []byte {
	return p.write.Seal(dst, header, payload, pn)
}

// Select picks the read keys for a packet whose header protection has been
// removed, from its Key Phase bit and full packet number. next reports that
// the keys are those of the next phase: if they open the packet, the peer
// has started a key update and the caller must call Commit.
//
// RFC 9001 §6.5: "packets with higher packet numbers [than any packet in
// the current phase] ... use the next keys, and packets with lower packet
// numbers use the previous keys" when the Key Phase bit differs from the
// current one.
func (p *KeyPhase) Select(keyPhase uint8, pn uint64) (k *Keys, next bool) {
	if keyPhase&1 == p.phase {
		return p.read, false
	}
	if p.prevRead != nil && (!p.haveFirst || pn < p.firstPN) {
		return p.prevRead, false
	}
	return p.nextRead, true
}

// Open selects the read keys for keyPhase and pn (see Select), opens the
// payload, and when the next-phase keys succeed, performs the peer-initiated
// key update: updated is then true.
//
// RFC 9001 §6.2: "If a packet is successfully processed using the next key
// and IV, then the peer has initiated a key update. The endpoint MUST update
// its send keys to the corresponding key phase in response".
func (p *KeyPhase) Open(dst, header, ciphertext []byte, pn uint64, keyPhase uint8) (plain []byte, updated bool, err error) {
	if p.read == nil {
		return nil, false, errNoKeys
	}
	k, next := p.Select(keyPhase, pn)
	plain, err = k.Open(dst, header, ciphertext, pn)
	if err != nil {
		return nil, false, err
	}
	if next {
		if err := p.rotate(); err != nil {
			return nil, false, err
		}
		updated = true
	}
	if k == p.read && (!p.haveFirst || pn < p.firstPN) {
		p.firstPN, p.haveFirst = pn, true
	}
	return plain, updated, nil
}

// Received records that a packet with number pn was opened with the current
// read keys, for callers that use Select and Keys.Open instead of Open.
func (p *KeyPhase) Received(pn uint64) {
	if !p.haveFirst || pn < p.firstPN {
		p.firstPN, p.haveFirst = pn, true
	}
}

// Commit performs a key update that the peer initiated, after a packet
// opened with the keys Select returned with next set (Open does this
// itself). The caller then calls Received for that packet.
func (p *KeyPhase) Commit() error { return p.rotate() }

// Update initiates a key update: from now on packets are sealed with the
// next keys under the flipped Key Phase bit, and packets of the new phase
// are opened with the matching read keys. RFC 9001 §6.1: "The endpoint
// ... updates its packet protection write secret and uses that to protect
// new packets". The caller enforces when an update is allowed.
func (p *KeyPhase) Update() error { return p.rotate() }

// rotate moves both directions to the next generation and precomputes the
// read keys of the one after.
func (p *KeyPhase) rotate() error {
	if p.read == nil || p.write == nil {
		return errNoKeys
	}
	nextRead, err := p.nextRead.Next()
	if err != nil {
		return err
	}
	nextWrite, err := p.write.Next()
	if err != nil {
		return err
	}
	p.prevRead, p.read, p.nextRead = p.read, p.nextRead, nextRead
	p.write = nextWrite
	p.phase ^= 1
	p.generation++
	p.haveFirst = false
	return nil
}

// DiscardPrevious drops the previous read keys. RFC 9001 §6.5: "An endpoint
// SHOULD retain old read keys for no more than three times the current
// PTO"; the engine calls this when that timer fires.
func (p *KeyPhase) DiscardPrevious() { p.prevRead = nil }
