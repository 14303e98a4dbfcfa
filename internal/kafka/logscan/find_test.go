package logscan

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/internal/testkit/testenv"
)

// TestFindDecodesEachKeptRecordOnce: Find returns what decode made of the
// records it kept, in the page's order, decoding each record once; an
// empty page has an empty (not nil) list, which the API shows as [].
func TestFindDecodesEachKeptRecordOnce(t *testing.T) {
	s, _ := seed(t, testenv.Kfake(t), 2, 30)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	decoded := map[string]int{}
	multipleOfTen := func(r *kgo.Record) (int, bool) {
		decoded[string(r.Value)]++
		p, i, ok := cutInt(string(r.Value))
		return p*1000 + i, ok && i%10 == 0
	}
	found, err := Find(ctx, s, Query{Limit: 4}, multipleOfTen)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(found.Items); got != "[0 10 20 1000]" {
		t.Errorf("items %s, want [0 10 20 1000]", got)
	}
	if found.Next == "" || found.Scanned != len(decoded) {
		t.Errorf("next %q, scanned %d; want a cursor and %d scanned", found.Next, found.Scanned, len(decoded))
	}
	for v, n := range decoded {
		if n != 1 {
			t.Errorf("%s decoded %d times", v, n)
		}
	}

	none, err := Find(ctx, s, Query{}, func(*kgo.Record) (int, bool) { return 0, false })
	if err != nil || none.Items == nil || len(none.Items) != 0 {
		t.Errorf("no match: items %#v, err %v; want an empty list", none.Items, err)
	}
}
