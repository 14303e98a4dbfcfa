package receiver

import (
	"container/list"
	"context"
	"sync"
	"time"

	"github.com/laneway/laneway/internal/plumbing/valutil"
)

// Defaults for the in-memory stores.
const (
	// DefaultMemoryMaxEntries bounds each in-memory store: at roughly 200
	// bytes per entry (an id of a few dozen bytes plus map and list
	// overhead) it is about 20 MB.
	DefaultMemoryMaxEntries = 100_000
	// DefaultRevisionTTL is how long an entity's revision is kept after its
	// last update. Laneway gives up on a delivery 72 h after it was
	// created, so no stale update can arrive much later than that.
	DefaultRevisionTTL = 7 * 24 * time.Hour
)

// MemoryDedupConfig configures NewMemoryDedup.
type MemoryDedupConfig struct {
	// MaxEntries caps how many webhook-ids are kept; past it the least
	// recently written is forgotten first (a very old duplicate may then be
	// handled again). Default: DefaultMemoryMaxEntries.
	MaxEntries int
	// Now is the clock claims and done marks expire by. Default: time.Now.
	Now func() time.Time
}

// MemoryDedup is a DedupStore in this process's memory, bounded in entries
// and in time. It is safe for concurrent use.
type MemoryDedup struct {
	mu  sync.Mutex
	ids *bounded[dedupEntry]
}

type dedupEntry struct {
	done  bool
	token string // of the claim, when not done
}

// NewMemoryDedup returns an empty MemoryDedup.
func NewMemoryDedup(cfg MemoryDedupConfig) *MemoryDedup {
	return &MemoryDedup{ids: newBounded[dedupEntry](cfg.MaxEntries, cfg.Now)}
}

// Claim implements DedupStore.
func (m *MemoryDedup) Claim(_ context.Context, id, token string, ttl time.Duration) (ClaimResult, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e, ok := m.ids.get(id); ok {
		if e.done {
			return AlreadyDone, nil
		}
		return InProgress, nil
	}
	m.ids.put(id, dedupEntry{token: token}, ttl)
	return Claimed, nil
}

// Done implements DedupStore.
func (m *MemoryDedup) Done(_ context.Context, id string, ttl time.Duration) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ids.put(id, dedupEntry{done: true}, ttl)
	return nil
}

// Release implements DedupStore.
func (m *MemoryDedup) Release(_ context.Context, id, token string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e, ok := m.ids.get(id); ok && !e.done && e.token == token {
		m.ids.remove(id)
	}
	return nil
}

// Len returns how many webhook-ids are held, expired ones not yet swept
// included. It is at most MaxEntries.
func (m *MemoryDedup) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ids.len()
}

// MemoryRevisionsConfig configures NewMemoryRevisions.
type MemoryRevisionsConfig struct {
	// MaxEntries caps how many entities are kept; past it the least
	// recently advanced is forgotten first (a stale update of it would then
	// pass). Default: DefaultMemoryMaxEntries.
	MaxEntries int
	// TTL is how long an entity is kept after its last Advance.
	// Default: DefaultRevisionTTL (7 days).
	TTL time.Duration
	// Now is the clock entries expire by. Default: time.Now.
	Now func() time.Time
}

// MemoryRevisions is a RevisionStore in this process's memory, bounded in
// entries and in time. It is safe for concurrent use.
type MemoryRevisions struct {
	mu        sync.Mutex
	ttl       time.Duration
	revisions *bounded[int64]
}

// NewMemoryRevisions returns an empty MemoryRevisions.
func NewMemoryRevisions(cfg MemoryRevisionsConfig) *MemoryRevisions {
	cfg.TTL = valutil.PositiveOr(cfg.TTL, DefaultRevisionTTL)
	return &MemoryRevisions{ttl: cfg.TTL, revisions: newBounded[int64](cfg.MaxEntries, cfg.Now)}
}

// Stale implements RevisionStore.
func (m *MemoryRevisions) Stale(_ context.Context, entity string, revision int64) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	stored, ok := m.revisions.get(entity)
	return ok && revision < stored, nil
}

// Advance implements RevisionStore. It refreshes the entity's TTL even when
// revision is not newer: the entity is still active.
func (m *MemoryRevisions) Advance(_ context.Context, entity string, revision int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if stored, ok := m.revisions.get(entity); ok && stored > revision {
		revision = stored
	}
	m.revisions.put(entity, revision, m.ttl)
	return nil
}

// Len returns how many entities are held, expired ones not yet swept
// included. It is at most MaxEntries.
func (m *MemoryRevisions) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.revisions.len()
}

// bounded is a map whose entries expire and whose size is capped; past the
// cap the least recently written entry goes first. It is not safe for
// concurrent use: the stores lock around it.
type bounded[V any] struct {
	max   int
	now   func() time.Time
	items map[string]*list.Element // of *boundedItem[V]
	order *list.List               // least recently written at the front
}

type boundedItem[V any] struct {
	key     string
	value   V
	expires time.Time
}

func newBounded[V any](maxEntries int, now func() time.Time) *bounded[V] {
	maxEntries = valutil.PositiveOr(maxEntries, DefaultMemoryMaxEntries)
	if now == nil {
		now = time.Now
	}
	return &bounded[V]{max: maxEntries, now: now, items: make(map[string]*list.Element), order: list.New()}
}

func (b *bounded[V]) get(key string) (V, bool) {
	var zero V
	el, ok := b.items[key]
	if !ok {
		return zero, false
	}
	it := el.Value.(*boundedItem[V])
	if !b.now().Before(it.expires) {
		b.removeElement(el)
		return zero, false
	}
	return it.value, true
}

func (b *bounded[V]) put(key string, value V, ttl time.Duration) {
	now := b.now()
	b.sweep(now)
	expires := now.Add(ttl)
	if el, ok := b.items[key]; ok {
		it := el.Value.(*boundedItem[V])
		it.value, it.expires = value, expires
		b.order.MoveToBack(el)
		return
	}
	b.items[key] = b.order.PushBack(&boundedItem[V]{key: key, value: value, expires: expires})
	for b.order.Len() > b.max {
		b.removeElement(b.order.Front())
	}
}

// sweep drops expired entries from the front, where the oldest writes are.
// With one TTL per store that is where entries expire first, so expired
// entries do not wait for the cap to be reached to free their memory.
func (b *bounded[V]) sweep(now time.Time) {
	for el := b.order.Front(); el != nil; el = b.order.Front() {
		if now.Before(el.Value.(*boundedItem[V]).expires) {
			return
		}
		b.removeElement(el)
	}
}

func (b *bounded[V]) remove(key string) {
	if el, ok := b.items[key]; ok {
		b.removeElement(el)
	}
}

func (b *bounded[V]) removeElement(el *list.Element) {
	delete(b.items, el.Value.(*boundedItem[V]).key)
	b.order.Remove(el)
}

func (b *bounded[V]) len() int { return b.order.Len() }
