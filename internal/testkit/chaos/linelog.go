package chaos

import (
	"bufio"
	"errors"
	"os"
)

// lineLog is a buffered log of JSON lines written as a run goes — the
// publisher's accepted events, the receivers' receipts and requests — for
// laneway-checkorder to read afterwards. Its owner serialises the writes.
type lineLog struct {
	w *bufio.Writer
	f *os.File
}

// createLineLog creates the log at path, emptying any earlier one.
func createLineLog(path string) (*lineLog, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	return &lineLog{w: bufio.NewWriterSize(f, 256<<10), f: f}, nil
}

// write appends one line; an error shows at close.
func (l *lineLog) write(line []byte) { _, _ = l.w.Write(append(line, '\n')) }

// close flushes and closes the file.
func (l *lineLog) close() error { return errors.Join(l.w.Flush(), l.f.Close()) }
