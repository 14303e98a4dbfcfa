package deliver

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http/httputil"
	"strconv"
	"time"
)

// The request head, written by hand: the header set is fixed, and building
// it into one pooled buffer (with the body behind it when small) sends a
// request with one write and no allocation.

// inlineBodyLimit is the largest body copied behind the head so that the
// request goes out in one write; a larger one is written from where it is,
// with the head, in one writev.
const inlineBodyLimit = 16 << 10

func (s *Sender) appendHead(dst []byte, t *target, r Request, ts time.Time) []byte {
	dst = append(dst, "POST "...)
	dst = append(dst, t.uri...)
	dst = append(dst, " HTTP/1.1\r\nHost: "...)
	dst = append(dst, t.host...)
	dst = append(dst, "\r\nUser-Agent: "...)
	dst = append(dst, s.cfg.UserAgent...)
	dst = append(dst, "\r\nContent-Type: application/json\r\nContent-Length: "...)
	dst = strconv.AppendInt(dst, int64(len(r.Body)), 10)
	if t.auth != "" {
		dst = append(dst, "\r\nAuthorization: "...)
		dst = append(dst, t.auth...)
	}
	dst = append(dst, "\r\nWebhook-Id: "...)
	dst = append(dst, r.MsgID...)
	dst = append(dst, "\r\nWebhook-Timestamp: "...)
	dst = strconv.AppendInt(dst, ts.Unix(), 10)
	dst = append(dst, "\r\nWebhook-Signature: "...)
	dst = r.Signer.AppendSignature(dst, r.MsgID, ts, r.Body)
	// The key is the webhook-id, for receivers that dedupe by this header.
	dst = append(dst, "\r\nIdempotency-Key: "...)
	dst = append(dst, r.MsgID...)
	return append(dst, "\r\n\r\n"...)
}

// validHeaderValue reports whether v can be sent as a header value: no
// control characters, so that nothing can end the header early.
func validHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < 0x20 && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

// respHead is what the attempt needs from a response's status line and
// headers.
type respHead struct {
	code       int
	close      bool  // the server closes the connection after this response
	length     int64 // Content-Length, -1 if none
	chunked    bool
	retryAfter string // kept for responses of 300 and above
	location   string
}

// maxResponseHeaderBytes stops an endpoint from making us buffer megabytes
// of headers, counted over every informational response and the final one.
const maxResponseHeaderBytes = 64 << 10

var (
	errHeadTooLarge = errors.New("response headers larger than 64 KiB")
	errNoResponse   = errors.New("the connection closed before a response")
)

// malformedError is a response that is not HTTP/1.x as we can read it.
type malformedError struct{ what string }

func (e *malformedError) Error() string { return "malformed HTTP response: " + e.what }

// readHead reads the final response's head, skipping informational (1xx)
// responses other than 101, which ends the exchange.
func readHead(br *bufio.Reader) (respHead, error) {
	budget := maxResponseHeaderBytes
	for {
		h, err := readOneHead(br, &budget)
		if err != nil || h.code == 101 || h.code >= 200 {
			return h, err
		}
	}
}

func readOneHead(br *bufio.Reader, budget *int) (respHead, error) {
	line, err := readLine(br, budget)
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = errNoResponse
		}
		return respHead{}, err
	}
	h := respHead{length: -1}
	var http10, keepAlive bool
	if h.code, http10, err = parseStatusLine(line); err != nil {
		return h, err
	}
	for {
		if line, err = readLine(br, budget); err != nil {
			return h, unexpectedEOF(err)
		}
		if len(line) == 0 {
			break
		}
		if err := h.addHeader(line, &keepAlive); err != nil {
			return h, err
		}
	}
	if http10 && !keepAlive {
		h.close = true
	}
	if h.chunked && h.length >= 0 {
		// Both framings: the chunks win, and the connection is not
		// trusted with another request.
		h.length, h.close = -1, true
	}
	return h, nil
}

func unexpectedEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// readLine reads one line of the head without its line ending, charging it
// to budget.
func readLine(br *bufio.Reader, budget *int) ([]byte, error) {
	line, err := br.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		long := append([]byte(nil), line...)
		for errors.Is(err, bufio.ErrBufferFull) && len(long) <= *budget {
			line, err = br.ReadSlice('\n')
			long = append(long, line...)
		}
		line = long
	}
	*budget -= len(line)
	if *budget < 0 {
		return nil, errHeadTooLarge
	}
	if err != nil {
		return nil, err
	}
	line = line[:len(line)-1]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	return line, nil
}

// parseStatusLine reads "HTTP/1.x NNN reason".
func parseStatusLine(line []byte) (code int, http10 bool, err error) {
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) || line[8] != ' ' ||
		(line[7] != '0' && line[7] != '1') || (len(line) > 12 && line[12] != ' ') {
		return 0, false, &malformedError{"bad status line"}
	}
	for _, c := range line[9:12] {
		if c < '0' || c > '9' {
			return 0, false, &malformedError{"bad status code"}
		}
		code = code*10 + int(c-'0')
	}
	if code < 100 {
		return 0, false, &malformedError{"bad status code"}
	}
	return code, line[7] == '0', nil
}

// addHeader takes in one header line.
func (h *respHead) addHeader(line []byte, keepAlive *bool) error {
	i := bytes.IndexByte(line, ':')
	if i <= 0 || bytes.ContainsAny(line[:i], " \t") {
		return &malformedError{"bad header line"}
	}
	name, value := line[:i], bytes.Trim(line[i+1:], " \t")
	switch {
	case bytes.EqualFold(name, []byte("Content-Length")):
		n, err := strconv.ParseInt(string(value), 10, 64)
		if err != nil || n < 0 || (h.length >= 0 && h.length != n) {
			return &malformedError{"bad Content-Length"}
		}
		h.length = n
	case bytes.EqualFold(name, []byte("Transfer-Encoding")):
		if !bytes.EqualFold(value, []byte("chunked")) {
			return &malformedError{"unsupported Transfer-Encoding"}
		}
		h.chunked = true
	case bytes.EqualFold(name, []byte("Connection")):
		h.close = h.close || hasToken(value, "close")
		*keepAlive = *keepAlive || hasToken(value, "keep-alive")
	case h.code >= 300 && h.retryAfter == "" && bytes.EqualFold(name, []byte("Retry-After")):
		h.retryAfter = string(value)
	case h.code >= 300 && h.location == "" && bytes.EqualFold(name, []byte("Location")):
		h.location = string(value)
	}
	return nil
}

// hasToken reports whether the comma-separated list v holds token.
func hasToken(v []byte, token string) bool {
	for part := range bytes.SplitSeq(v, []byte(",")) {
		if bytes.EqualFold(bytes.Trim(part, " \t"), []byte(token)) {
			return true
		}
	}
	return false
}

// hasBody reports whether a response with this status carries a body.
func (h *respHead) hasBody() bool { return h.code >= 200 && h.code != 204 && h.code != 304 }

// readBody reads at most keep bytes of the body for the error, then up to
// drainLimit more so that a short body reaches its end. It reports whether
// it did: only then can the connection carry another request.
func readBody(br *bufio.Reader, h respHead, keep int) (kept string, complete bool) {
	switch {
	case !h.hasBody():
		return "", true
	case h.chunked:
		return readChunked(br, keep)
	case h.length >= 0:
		return readSized(br, h.length, keep)
	default:
		// Delimited by the close: keep what the error wants, no more.
		if keep > 0 {
			kept, _ = readCapped(br, keep)
		}
		return kept, false
	}
}

func readSized(br *bufio.Reader, length int64, keep int) (string, bool) {
	var kept string
	if keep > 0 {
		var n int
		kept, n = readCapped(io.LimitReader(br, length), keep)
		length -= int64(n)
	}
	if length > drainLimit {
		return kept, false
	}
	n, err := br.Discard(int(length))
	return kept, err == nil && n == int(length)
}

func readChunked(br *bufio.Reader, keep int) (string, bool) {
	body := httputil.NewChunkedReader(br)
	var kept string
	if keep > 0 {
		kept, _ = readCapped(body, keep)
	}
	if _, err := io.CopyN(io.Discard, body, drainLimit+1); !errors.Is(err, io.EOF) {
		return kept, false // longer than we read, or broken
	}
	// The trailer section: header lines up to an empty one.
	budget := maxResponseHeaderBytes
	for {
		line, err := readLine(br, &budget)
		if err != nil {
			return kept, false
		}
		if len(line) == 0 {
			return kept, true
		}
	}
}

// describeReadError says what went wrong reading a response, for
// last_error.
func describeReadError(err error) error {
	var me *malformedError
	if errors.As(err, &me) || errors.Is(err, errHeadTooLarge) || errors.Is(err, errNoResponse) {
		return err
	}
	return fmt.Errorf("reading the response: %w", err)
}
