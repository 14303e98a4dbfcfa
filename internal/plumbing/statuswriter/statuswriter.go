// Package statuswriter wraps an http.ResponseWriter to remember how a
// request was answered: the status, the body's size and whether the
// handler took the connection over. The API's access log and panic
// handler and the test receivers read it.
package statuswriter

import (
	"bufio"
	"net"
	"net/http"
)

// Writer records the answer written through it.
type Writer struct {
	http.ResponseWriter
	// Status is the first status written, 200 once a body is written
	// without one, and 0 while nothing was written.
	Status int
	// Bytes counts the body's bytes written.
	Bytes int64
	// Hijacked says the handler took the connection over (no status then).
	Hijacked bool
}

// Wrap returns w itself when it is already a Writer (a handler wrapped
// twice records once), else a Writer around it.
func Wrap(w http.ResponseWriter) *Writer {
	if sw, ok := w.(*Writer); ok {
		return sw
	}
	return &Writer{ResponseWriter: w}
}

// WriteHeader records the first status, as net/http sends only that one.
func (w *Writer) WriteHeader(status int) {
	if w.Status == 0 {
		w.Status = status
	}
	w.ResponseWriter.WriteHeader(status)
}

// Write records the implicit 200 and the size.
func (w *Writer) Write(b []byte) (int, error) {
	if w.Status == 0 {
		w.Status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.Bytes += int64(n)
	return n, err
}

// Hijack takes the connection over (http.ResponseController finds it here).
func (w *Writer) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	w.Hijacked = true
	return http.NewResponseController(w.ResponseWriter).Hijack()
}

// Unwrap lets http.ResponseController reach the writer underneath.
func (w *Writer) Unwrap() http.ResponseWriter { return w.ResponseWriter }
