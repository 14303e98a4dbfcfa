// Package engine runs Laneway's two stages: the fan-out stage, which turns
// each event into one delivery per subscribed endpoint, and the delivery
// stage, which gives every endpoint its own lane (per-entity order, a
// concurrency limit, retries) and commits each partition's watermark.
package engine
