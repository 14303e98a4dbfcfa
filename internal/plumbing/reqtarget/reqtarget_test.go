package reqtarget_test

import (
	"net/url"
	"testing"

	"github.com/laneway/laneway/internal/plumbing/reqtarget"
)

func TestEscape(t *testing.T) {
	tests := []struct{ in, want string }{
		{"/hook?q=a b", "/hook?q=a%20b"},
		{"/hook?q=é", "/hook?q=%C3%A9"},
		{"/a\x00\r\n\x7f", "/a%00%0D%0A%7F"},
		{`/{}|[]^<>"\` + "`", "/%7B%7D%7C%5B%5D%5E%3C%3E%22%5C%60"},
		{"/100%?a=%4&b=%zz&c=%", "/100%25?a=%254&b=%25zz&c=%25"},
		{"/a/%2F;b=c?x=%c3%A9&y=a+b:@/?!$'()*,~-._", "/a/%2F;b=c?x=%c3%A9&y=a+b:@/?!$'()*,~-._"},
		{"", ""},
	}
	for _, tc := range tests {
		got := reqtarget.Escape(tc.in)
		if got != tc.want {
			t.Errorf("Escape(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if valid := reqtarget.Valid(tc.in); valid != (tc.in == tc.want) {
			t.Errorf("Valid(%q) = %v, want %v", tc.in, valid, !valid)
		}
	}
}

// FuzzEscape: whatever the target, the escaped one is valid, escaping it
// again changes nothing, and it decodes as the original would where the
// original decodes at all.
func FuzzEscape(f *testing.F) {
	for _, s := range []string{"/hook?q=a b", "/é?%", "/%41%zz", "/a\r\nb"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		out := reqtarget.Escape(in)
		if !reqtarget.Valid(out) {
			t.Fatalf("Escape(%q) = %q, which Valid refuses", in, out)
		}
		if again := reqtarget.Escape(out); again != out {
			t.Fatalf("Escape(%q) = %q, escaped again %q", in, out, again)
		}
		want, err := url.PathUnescape(in)
		if err != nil {
			return
		}
		if got, err := url.PathUnescape(out); err != nil || got != want {
			t.Fatalf("Escape(%q) = %q decodes to %q (%v), the original to %q", in, out, got, err, want)
		}
	})
}
