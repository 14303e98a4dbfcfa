// Package receiver is the receiving side of Laneway webhooks: it verifies the
// Standard Webhooks signature of a delivery, drops duplicates by webhook-id and
// stale state updates by entity revision, and hands the application a typed
// Delivery.
//
// The usual entry point is the http.Handler built by NewHandler:
//
//	h, err := receiver.NewHandler(receiver.Config{
//		Secrets: []string{os.Getenv("LANEWAY_WEBHOOK_SECRET")},
//	}, func(ctx context.Context, d receiver.Delivery) error {
//		return jobs.Enqueue(ctx, d) // answer within Laneway's 5 s, work later
//	})
//	if err != nil { ... }
//	mux.Handle("POST /webhooks/laneway", h)
//
// It answers Laneway in the terms of the delivery contract, so that every
// answer makes Laneway do the right thing:
//
//	200  handled, a duplicate, or a stale revision: Laneway is done
//	401  missing or bad signature, timestamp more than Tolerance away: retried
//	400  a body that is not a delivery: retried
//	405  not a POST: retried
//	409  the same webhook-id is being handled right now: retried later
//	413  body over MaxBodyBytes: Laneway dead-letters the delivery, as
//	     retrying cannot make it smaller
//	500  the application returned an error: retried
//	503  the dedup or revision store failed: retried
//
// # Duplicates
//
// Laneway delivers at least once: a retry after a lost response, or a replay
// after a crash, reuses the webhook-id. The handler claims the webhook-id in a
// DedupStore before calling the application and remembers it as done only
// after the application succeeded. A failed (or panicking) call releases the
// claim, so Laneway's retry of it is processed and not dropped as a duplicate.
//
// # Stale revisions
//
// Every delivery names its entity and the entity's revision. A delivery whose
// revision is strictly lower than the newest one already handled for the
// entity is stale and dropped. An equal revision is not stale: it is either a
// redelivery of the same event, which the webhook-id check drops, or another
// event of the same entity state (a fact such as "order.note_added" sent
// without a new revision), which must reach the application. Revision 0 means
// the producer sent no revision, and such deliveries skip the check.
//
// Laneway never has two deliveries of one entity in flight to one endpoint,
// so a check followed by an update is enough in practice. An application that
// must never go backwards even across processes sharing a store should still
// write conditionally (UPDATE … WHERE revision < $new).
//
// # Stores
//
// The default stores are in memory, bounded and per process: NewMemoryDedup
// and NewMemoryRevisions. Receivers running several processes behind a load
// balancer share state through the Redis stores of package
// github.com/laneway/laneway/receiver/redisstore, or through their own
// implementation of DedupStore and RevisionStore.
//
// # Without the handler
//
// Verifier.ReadRequest reads, verifies and parses a request; Verifier.Verify
// checks a body that was read already; Parse decodes a verified body. The
// errors are typed: *VerificationError, *PayloadError and *TooLargeError.
//
// # Pull feeds
//
// A pull endpoint receives nothing: Laneway appends its deliveries, in
// order, to the endpoint's feed, and the consumer reads them with one of
// the endpoint's consumer tokens ("lwf_…"). Feed follows a feed:
//
//	feed, err := receiver.NewFeed(receiver.FeedConfig{
//		BaseURL:    "https://laneway.example.com",
//		EndpointID: "ep_…",
//		Token:      os.Getenv("LANEWAY_FEED_TOKEN"),
//	})
//	if err != nil { ... }
//	err = feed.Run(ctx, func(ctx context.Context, ev receiver.FeedEvent) error {
//		return apply(ctx, ev) // in order, one at a time
//	})
//
// Run long-polls, so an event reaches the handler as soon as it is
// appended, and acknowledges each page on the server once every event of
// it was handled: a restarted consumer goes on from there. An application
// that commits Feed.Cursor with its own writes sets FeedConfig.NoAck and
// starts from its stored cursor instead. Either way a page whose handling
// was cut short is read again, so handlers should be idempotent.
package receiver
