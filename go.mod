module github.com/quiver-quic/quiver

go 1.26.8

require (
	github.com/quic-go/qpack v0.6.0
	golang.org/x/crypto v0.59.0
	golang.org/x/net v0.62.0
	golang.org/x/sys v0.50.0
	google.golang.org/protobuf v1.36.12
)
