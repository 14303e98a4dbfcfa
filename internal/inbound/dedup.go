package inbound

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// claimScript claims KEYS[1] for request ARGV[1] for ARGV[2] ms. It
// returns "" when the caller owns the key (it was free, or the caller
// claimed it before), else the owner's request id.
//
// "The caller claimed it before" is what keeps a crash from losing an
// event: a request claims its key inside the verify transaction; if that
// transaction aborts, the request is read again from the last committed
// offset and finds its own claim, so it forwards instead of calling itself
// a duplicate. A different request with the same key (a provider retry)
// finds another owner and is a duplicate.
const claimScript = `
local v = redis.call('GET', KEYS[1])
if not v then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return ''
end
if v == ARGV[1] then return '' end
return v
`

// deduper remembers which request forwarded each (source, dedup key) for
// the dedup window. Redis holds no truth: when it fails, every request is
// forwarded (a duplicate, never a loss).
type deduper struct {
	rdb    redis.UniversalClient
	prefix string
	window time.Duration
}

type claim struct {
	source, key, requestID string
}

func (d *deduper) redisKey(source, key string) string {
	sum := sha256.Sum256([]byte(key))
	return d.prefix + "inbound:dedup:" + source + ":" + hex.EncodeToString(sum[:16])
}

// claimAll claims every key in one round trip, in order (so of two
// requests with the same key in one batch, the first wins). It returns the
// owner per claim: "" means forward.
func (d *deduper) claimAll(ctx context.Context, claims []claim) ([]string, error) {
	owners := make([]string, len(claims))
	if len(claims) == 0 {
		return owners, nil
	}
	ms := d.window.Milliseconds()
	pipe := d.rdb.Pipeline()
	cmds := make([]*redis.Cmd, len(claims))
	for i, c := range claims {
		cmds[i] = pipe.Eval(ctx, claimScript, []string{d.redisKey(c.source, c.key)}, c.requestID, ms)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return make([]string, len(claims)), fmt.Errorf("dedup claims: %w", err)
	}
	for i, cmd := range cmds {
		owners[i], _ = cmd.Val().(string)
	}
	return owners, nil
}
