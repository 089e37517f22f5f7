package rpc

import (
	"encoding/json"
	"fmt"

	"google.golang.org/protobuf/proto"
)

// Codec turns messages into bytes and back. Its name travels with each
// request, so a server answers every client in the codec it chose.
type Codec interface {
	Name() string
	Marshal(v any) ([]byte, error)
	Unmarshal(data []byte, v any) error
}

// JSON is the encoding/json codec, usable with any Go type.
var JSON Codec = jsonCodec{}

// Proto is the protobuf codec; its messages must implement proto.Message.
var Proto Codec = protoCodec{}

var codecs = map[string]Codec{JSON.Name(): JSON, Proto.Name(): Proto}

type jsonCodec struct{}

func (jsonCodec) Name() string                       { return "json" }
func (jsonCodec) Marshal(v any) ([]byte, error)      { return json.Marshal(v) }
func (jsonCodec) Unmarshal(data []byte, v any) error { return json.Unmarshal(data, v) }

type protoCodec struct{}

func (protoCodec) Name() string { return "proto" }

func (protoCodec) Marshal(v any) ([]byte, error) {
	m, ok := v.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("proto codec: %T is not a proto.Message", v)
	}
	return proto.Marshal(m)
}

func (protoCodec) Unmarshal(data []byte, v any) error {
	m, ok := v.(proto.Message)
	if !ok {
		return fmt.Errorf("proto codec: %T is not a proto.Message", v)
	}
	return proto.Unmarshal(data, m)
}

// decode unmarshals b into a new T; a failure is an error with code
// (InvalidArgument for a request the server cannot read, Internal for an
// answer the client cannot).
func decode[T any](codec Codec, b []byte, code Code) (*T, error) {
	v := new(T)
	if err := codec.Unmarshal(b, v); err != nil {
		return nil, Errorf(code, "decode %T: %v", v, err)
	}
	return v, nil
}
