package receiver_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/laneway/laneway/receiver"
)

// exampleLaneway stands in for Laneway: the feed of ep_orders holds two
// events, after which a read finds nothing new.
func exampleLaneway() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/feed/ep_orders", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("cursor") == "cur_2" {
			fmt.Fprint(w, `{"events":[],"next_cursor":"cur_2"}`)
			return
		}
		fmt.Fprint(w, `{"events":[
			{"sequence":1,"id":"evt-1","type":"order.created","timestamp":"2026-12-02T01:02:03Z","entity":{"id":"order:1","revision":1},"data":{"status":"new"}},
			{"sequence":2,"id":"evt-2","type":"order.updated","timestamp":"2026-12-02T01:02:04Z","entity":{"id":"order:1","revision":2},"data":{"status":"paid"}}
		],"next_cursor":"cur_2"}`)
	})
	mux.HandleFunc("POST /v1/feed/ep_orders/ack", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"acked_cursor":"cur_2"}`)
	})
	return mux
}

func ExampleFeed() {
	laneway := httptest.NewServer(exampleLaneway())
	defer laneway.Close()

	feed, err := receiver.NewFeed(receiver.FeedConfig{
		BaseURL:    laneway.URL,
		EndpointID: "ep_orders",
		Token:      "lwf_example", // os.Getenv("LANEWAY_FEED_TOKEN") in earnest
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	err = feed.Run(ctx, func(ctx context.Context, ev receiver.FeedEvent) error {
		fmt.Printf("%d %s %s revision %d: %s\n", ev.Sequence, ev.Type, ev.Entity.ID, ev.Entity.Revision, ev.Data)
		if ev.Sequence == 2 {
			stop() // a real consumer runs until it shuts down
		}
		return nil
	})
	fmt.Printf("%v at %s\n", err, feed.Cursor())
	// Output:
	// 1 order.created order:1 revision 1: {"status":"new"}
	// 2 order.updated order:1 revision 2: {"status":"paid"}
	// context canceled at cur_2
}
