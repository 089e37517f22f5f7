package main

import "context"

// datagramConn is the DATAGRAM API of quic-go releases since the frames got
// their RFC 9221 names; older releases (SendMessage) simply do not echo.
type datagramConn interface {
	ReceiveDatagram(context.Context) ([]byte, error)
	SendDatagram([]byte) error
}

// echoDatagrams sends every DATAGRAM frame's payload back on the same
// connection, so that a peer can prove its RFC 9221 support against
// quic-go (datagrams are unreliable: a lost echo is not an error here).
func echoDatagrams(ctx context.Context, conn any) {
	d, ok := conn.(datagramConn)
	if !ok {
		return
	}
	for {
		b, err := d.ReceiveDatagram(ctx)
		if err != nil {
			return
		}
		_ = d.SendDatagram(b)
	}
}
