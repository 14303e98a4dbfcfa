package statuswriter

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestWriterRecordsTheAnswer(t *testing.T) {
	for _, tc := range []struct {
		name   string
		handle func(w http.ResponseWriter)
		status int
		bytes  int64
	}{
		{"nothing written", func(http.ResponseWriter) {}, 0, 0},
		{"body without a status", func(w http.ResponseWriter) { io.WriteString(w, "hello") }, 200, 5},
		{"first status wins", func(w http.ResponseWriter) {
			w.WriteHeader(503)
			w.WriteHeader(200)
			io.WriteString(w, "busy")
		}, 503, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := Wrap(httptest.NewRecorder())
			tc.handle(w)
			if w.Status != tc.status || w.Bytes != tc.bytes {
				t.Errorf("status %d, bytes %d; want %d, %d", w.Status, w.Bytes, tc.status, tc.bytes)
			}
		})
	}
}

func TestWrapOnceAndHijack(t *testing.T) {
	w := Wrap(httptest.NewRecorder())
	if Wrap(w) != w {
		t.Error("wrapping a Writer made another")
	}
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		sw := Wrap(rw)
		conn, _, err := http.NewResponseController(sw).Hijack()
		if err != nil {
			t.Errorf("hijack: %v", err)
			return
		}
		conn.Close()
		if !sw.Hijacked || sw.Status != 0 {
			t.Errorf("hijacked %v, status %d; want true, 0", sw.Hijacked, sw.Status)
		}
	}))
	defer srv.Close()
	if resp, err := http.Get(srv.URL); err == nil {
		resp.Body.Close()
		t.Error("a hijacked and closed connection answered")
	}
}
