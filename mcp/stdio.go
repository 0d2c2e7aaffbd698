package mcp

import (
	"context"
	"errors"
	"io"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// FinishInFlight wraps a stream transport (stdio) so that the end of its input does not end the
// requests already read: the SDK cancels every request in flight when a read fails, so a client
// that writes its last request and closes its side (`echo … | clihostctl mcp jq`) would never get
// the answer. The wrapped connection's Read, at the end of the input, first waits until every
// request read has been answered, then reports it. It reports it at once when the server has asked
// the client something (an approval's elicitation) that is still unanswered: no answer can come.
func FinishInFlight(t sdk.Transport) sdk.Transport { return finishTransport{t} }

type finishTransport struct{ sdk.Transport }

func (t finishTransport) Connect(ctx context.Context) (sdk.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &finishConn{Connection: c, pending: map[jsonrpc.ID]bool{}, asked: map[jsonrpc.ID]bool{},
		changed: make(chan struct{}, 1), closed: make(chan struct{})}, nil
}

// finishConn tracks the requests read and not yet answered (pending) and the server's own
// requests not yet answered (asked).
type finishConn struct {
	sdk.Connection
	mu             sync.Mutex
	pending, asked map[jsonrpc.ID]bool
	changed        chan struct{} // a value when pending or asked shrank
	closeOnce      sync.Once
	closed         chan struct{}
}

func (c *finishConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if err != nil {
		if errors.Is(err, io.EOF) {
			c.waitAnswered(ctx)
		}
		return nil, err
	}
	c.mu.Lock()
	switch m := msg.(type) {
	case *jsonrpc.Request:
		if m.IsCall() {
			c.pending[m.ID] = true
		}
	case *jsonrpc.Response:
		delete(c.asked, m.ID)
	}
	c.mu.Unlock()
	return msg, nil
}

func (c *finishConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if m, ok := msg.(*jsonrpc.Request); ok && m.IsCall() {
		c.mu.Lock()
		c.asked[m.ID] = true
		c.mu.Unlock()
		c.signal()
	}
	err := c.Connection.Write(ctx, msg)
	if m, ok := msg.(*jsonrpc.Response); ok {
		c.mu.Lock()
		delete(c.pending, m.ID)
		c.mu.Unlock()
		c.signal()
	}
	return err
}

func (c *finishConn) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return c.Connection.Close()
}

// signal wakes waitAnswered.
func (c *finishConn) signal() {
	select {
	case c.changed <- struct{}{}:
	default:
	}
}

// waitAnswered returns when no request read is unanswered, the server waits for an answer of the
// client, the connection is closed or ctx ends.
func (c *finishConn) waitAnswered(ctx context.Context) {
	for {
		c.mu.Lock()
		done := len(c.pending) == 0 || len(c.asked) > 0
		c.mu.Unlock()
		if done {
			return
		}
		select {
		case <-c.changed:
		case <-c.closed:
			return
		case <-ctx.Done():
			return
		}
	}
}
