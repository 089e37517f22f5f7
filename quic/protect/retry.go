package protect

import (
	"crypto/aes"
	"crypto/cipher"
	"fmt"
	"sync"
)

// RetryTagSize is the length of the Retry Integrity Tag (RFC 9000 §17.2.5:
// "Retry Integrity Tag (128)").
const RetryTagSize = 16

var (
	retryAEADv1 = sync.OnceValue(func() cipher.AEAD { return newRetryAEAD(&paramsV1) })
	retryAEADv2 = sync.OnceValue(func() cipher.AEAD { return newRetryAEAD(&paramsV2) })
)

func newRetryAEAD(p *versionParams) cipher.AEAD {
	block, err := aes.NewCipher(p.retryKey[:])
	if err != nil {
		panic("protect: Retry key: " + err.Error())
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		panic("protect: Retry AEAD: " + err.Error())
	}
	return aead
}

func retryAEAD(version uint32) (cipher.AEAD, *versionParams, error) {
	p, err := params(version)
	if err != nil {
		return nil, nil, err
	}
	if version == Version2 {
		return retryAEADv2(), p, nil
	}
	return retryAEADv1(), p, nil
}

// retryPseudoPacket builds the associated data of the Retry integrity tag.
// RFC 9001 §5.8:
//
//	Retry Pseudo-Packet {
//	  ODCID Length (8),
//	  Original Destination Connection ID (0..160),
//	  Header Form (1) = 1,
//	  ...
//	  Retry Token (..),
//	}
//
// "The Retry Pseudo-Packet is not sent over the wire. It is computed by
// taking the transmitted Retry packet, removing the Retry Integrity Tag, and
// prepending the two following fields: ODCID Length ... Original Destination
// Connection ID".
func retryPseudoPacket(odcid, retryWithoutTag []byte) ([]byte, error) {
	if len(odcid) > 255 {
		return nil, fmt.Errorf("protect: original destination connection ID of %d bytes", len(odcid))
	}
	pseudo := make([]byte, 0, 1+len(odcid)+len(retryWithoutTag))
	pseudo = append(pseudo, byte(len(odcid)))
	pseudo = append(pseudo, odcid...)
	return append(pseudo, retryWithoutTag...), nil
}

// RetryIntegrityTag computes the Retry Integrity Tag of a Retry packet
// (given without its tag) sent in response to a packet whose Destination
// Connection ID was odcid. RFC 9001 §5.8: "The Retry Integrity Tag is a
// 128-bit field that is computed as the output of AEAD_AES_128_GCM ... The
// plaintext, P, is empty. The associated data, A, is the contents of the
// Retry Pseudo-Packet". Version 2 uses its own key and nonce
// (RFC 9369 §3.3.3).
func RetryIntegrityTag(version uint32, odcid, retryWithoutTag []byte) ([RetryTagSize]byte, error) {
	var tag [RetryTagSize]byte
	aead, p, err := retryAEAD(version)
	if err != nil {
		return tag, err
	}
	pseudo, err := retryPseudoPacket(odcid, retryWithoutTag)
	if err != nil {
		return tag, err
	}
	copy(tag[:], aead.Seal(nil, p.retryNonce[:], nil, pseudo))
	return tag, nil
}

// AppendRetryIntegrityTag returns retryWithoutTag with its Retry Integrity
// Tag appended (reusing its capacity when it has room).
func AppendRetryIntegrityTag(version uint32, odcid, retryWithoutTag []byte) ([]byte, error) {
	tag, err := RetryIntegrityTag(version, odcid, retryWithoutTag)
	if err != nil {
		return nil, err
	}
	return append(retryWithoutTag, tag[:]...), nil
}

// VerifyRetry checks the Retry Integrity Tag at the end of a whole Retry
// packet against odcid, the Destination Connection ID of the client's first
// Initial. It returns ErrInvalidRetry when the tag does not match. RFC 9000
// §17.2.5.2: "Clients MUST discard Retry packets that have a Retry Integrity
// Tag that cannot be validated".
func VerifyRetry(version uint32, odcid, retry []byte) error {
	aead, p, err := retryAEAD(version)
	if err != nil {
		return err
	}
	if len(retry) < RetryTagSize {
		return ErrInvalidRetry
	}
	body, tag := retry[:len(retry)-RetryTagSize], retry[len(retry)-RetryTagSize:]
	pseudo, err := retryPseudoPacket(odcid, body)
	if err != nil {
		return err
	}
	// Opening the empty plaintext compares the tag in constant time.
	if _, err := aead.Open(nil, p.retryNonce[:], tag, pseudo); err != nil {
		return ErrInvalidRetry
	}
	return nil
}
