package rpc

import (
	"context"
	"errors"
	"fmt"
)

// Code is the outcome of a call. The values travel on the wire, so they
// never change; they follow the usual RPC status vocabulary so that users
// of other frameworks recognise them.
type Code uint32

// Status codes.
const (
	OK                 Code = 0
	Canceled           Code = 1
	Unknown            Code = 2
	InvalidArgument    Code = 3
	DeadlineExceeded   Code = 4
	NotFound           Code = 5
	AlreadyExists      Code = 6
	PermissionDenied   Code = 7
	ResourceExhausted  Code = 8
	FailedPrecondition Code = 9
	Aborted            Code = 10
	OutOfRange         Code = 11
	Unimplemented      Code = 12
	Internal           Code = 13
	Unavailable        Code = 14
	DataLoss           Code = 15
	Unauthenticated    Code = 16
)

var codeNames = [...]string{
	"OK", "Canceled", "Unknown", "InvalidArgument", "DeadlineExceeded", "NotFound",
	"AlreadyExists", "PermissionDenied", "ResourceExhausted", "FailedPrecondition",
	"Aborted", "OutOfRange", "Unimplemented", "Internal", "Unavailable", "DataLoss",
	"Unauthenticated",
}

// String returns the code's name, e.g. "Unavailable" (Code(N) for an unknown one).
func (c Code) String() string {
	if int(c) < len(codeNames) {
		return codeNames[c]
	}
	return fmt.Sprintf("Code(%d)", uint32(c))
}

// Status is the error a failed call returns: a code and a message. Handlers
// return one (through [Errorf]) to choose the code the client sees; any
// other error becomes Unknown.
type Status struct {
	Code    Code
	Message string

	// notSent marks a failure that happened before the request could have
	// reached a server, so the call may be retried even when it is not
	// idempotent. It never travels on the wire.
	notSent bool
}

// Error gives the status code's name and the message.
func (s *Status) Error() string {
	if s.Message == "" {
		return "rpc: " + s.Code.String()
	}
	return "rpc: " + s.Code.String() + ": " + s.Message
}

// Is lets errors.Is match two statuses with the same code.
func (s *Status) Is(target error) bool {
	t, ok := target.(*Status)
	return ok && t.Code == s.Code
}

// Errorf returns a *Status with code and a formatted message.
func Errorf(code Code, format string, args ...any) error {
	return &Status{Code: code, Message: fmt.Sprintf(format, args...)}
}

// CodeOf returns the code of err: OK for nil, the status code for a *Status
// anywhere in the chain, Canceled or DeadlineExceeded for the context
// errors, and Unknown otherwise.
func CodeOf(err error) Code {
	return statusOf(err).Code
}

// statusOf turns any error into a *Status (nil for nil).
func statusOf(err error) *Status {
	if err == nil {
		return &Status{Code: OK}
	}
	var s *Status
	switch {
	case errors.As(err, &s):
		return s
	case errors.Is(err, context.DeadlineExceeded):
		return &Status{Code: DeadlineExceeded, Message: err.Error()}
	case errors.Is(err, context.Canceled):
		return &Status{Code: Canceled, Message: err.Error()}
	}
	return &Status{Code: Unknown, Message: err.Error()}
}

// ctxStatus is the status of a call whose context ended.
func ctxStatus(ctx context.Context) *Status {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return &Status{Code: DeadlineExceeded, Message: "deadline exceeded"}
	}
	return &Status{Code: Canceled, Message: "call canceled"}
}

// unavailable is the status of a call that failed because its transport
// broke or closed.
func unavailable(notSent bool, format string, args ...any) *Status {
	return &Status{Code: Unavailable, Message: fmt.Sprintf(format, args...), notSent: notSent}
}
