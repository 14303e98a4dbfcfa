package app

import (
	"context"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/laneway/laneway/internal/model/topics"
	"github.com/laneway/laneway/internal/modes/feed"
)

// startFeeds prepares pull endpoints' feeds: the writer the delivery stage
// appends with, and the service the API reads, acknowledges and
// administers them with. The writer's appends wake this instance's long
// polls at once. Both stop after the stage and the HTTP server.
func (a *App) startFeeds(ctx context.Context) error {
	writerClient, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(a.brokers...), kgo.RequiredAcks(kgo.AllISRAcks()),
		// Idempotent (franz-go's default) and not transactional: the
		// feed's offsets are its sequences and must have no gaps.
		kgo.ProducerLinger(0),
	}, a.clientOpts("feed-writer")...)...)
	if err != nil {
		return err
	}
	a.onStop(writerClient.Close)
	readerClient, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(a.brokers...)}, a.clientOpts("feed")...)...)
	if err != nil {
		return err
	}
	a.onStop(readerClient.Close)
	groups := topics.GroupsFor(a.cfg.GroupPrefix)
	svc, err := feed.NewService(feed.ServiceConfig{
		Client: readerClient, Topics: a.cfg.Topics, Group: groups.Feed, BatchGroup: groups.Batch, Redis: a.rdb, Logger: a.log,
	})
	if err != nil {
		return err
	}
	w, err := feed.NewWriter(feed.WriterConfig{Client: writerClient, Appended: svc.Appended})
	if err != nil {
		return err
	}
	if err := a.run(ctx, svc, stopWithin); err != nil {
		return err
	}
	a.registry.MustRegister(feed.NewCollector(svc, a.pullEndpointIDs, nil))
	a.feeds, a.feedOut, a.feedProducer = svc, w, writerClient
	return nil
}

// pullEndpointIDs lists the pull endpoints, for the feed metrics.
func (a *App) pullEndpointIDs() []string {
	var ids []string
	for _, e := range a.store.List() {
		if e.Pull() {
			ids = append(ids, e.ID)
		}
	}
	return ids
}
