package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/laneway/laneway/internal/admin/client"
)

// feedTokenCommands are `laneway endpoints feed-tokens ...`: the consumer
// tokens of pull endpoints, managed with the admin token.
func feedTokenCommands() []*command {
	var overlap optionalDuration
	return []*command{
		{
			name: "endpoints feed-tokens create", synopsis: "endpoints feed-tokens create <id>", args: 1,
			about: "Make a consumer token for a pull endpoint's feed. The answer shows the token, the only time it is shown.",
			run: func(ctx context.Context, c cmdIO, args []string) error {
				tok, err := c.c.CreateFeedToken(ctx, args[0])
				return showNewFeedToken(c, args[0], tok, err)
			},
		},
		idCommand("endpoints feed-tokens list", "List a pull endpoint's valid consumer tokens (never the tokens themselves).",
			(*client.Client).ListFeedTokens, showFeedTokens),
		{
			name: "endpoints feed-tokens rotate", synopsis: "endpoints feed-tokens rotate <id> <token-id> [--overlap 1h]", args: 2,
			about: "Replace a consumer token with a new one; the old one stays valid for the overlap, so the consumer can switch without a gap.",
			flags: func(fs *flag.FlagSet) {
				fs.Var(&overlap, "overlap", "how long the old token stays valid (default 0: revoked at once)")
			},
			run: func(ctx context.Context, c cmdIO, args []string) error {
				tok, err := c.c.RotateFeedToken(ctx, args[0], args[1], overlap.d)
				if err := showNewFeedToken(c, args[0], tok, err); err != nil || c.flags.json() {
					return err
				}
				if overlap.d > 0 {
					fmt.Fprintf(c.stdout, "The old token %s stays valid for %s.\n", args[1], overlap.d)
				} else {
					fmt.Fprintf(c.stdout, "The old token %s is revoked.\n", args[1])
				}
				return nil
			},
		},
		{
			name: "endpoints feed-tokens revoke", synopsis: "endpoints feed-tokens revoke <id> <token-id>", args: 2,
			about: "Revoke a consumer token at once; its consumer's next read is refused (401).",
			run: func(ctx context.Context, c cmdIO, args []string) error {
				if err := c.c.RevokeFeedToken(ctx, args[0], args[1]); err != nil {
					return err
				}
				if c.flags.json() {
					return encodeJSON(c.stdout, map[string]any{"endpoint_id": args[0], "id": args[1], "revoked": true})
				}
				fmt.Fprintf(c.stdout, "revoked feed token %s of %s\n", args[1], args[0])
				return nil
			},
		},
	}
}

// showNewFeedToken prints a token just made, which the API never shows again.
func showNewFeedToken(c cmdIO, endpointID string, tok client.FeedToken, err error) error {
	if err != nil {
		return err
	}
	if c.flags.json() {
		return writeJSON(c.stdout, tok.Raw)
	}
	t := newTable(c.stdout)
	t.row("id", tok.ID)
	t.row("token", tok.Token)
	t.row("created_at", fmtTime(tok.CreatedAt))
	if err := t.flush(); err != nil {
		return err
	}
	fmt.Fprintf(c.stdout, "\nKeep the token: it is shown only now. Its consumer reads the feed with it\n"+
		"(laneway feed tail %s, with the token in %s).\n", endpointID, feedTokenEnv)
	return nil
}

// showFeedTokens prints a pull endpoint's valid consumer tokens the API
// answered with.
func showFeedTokens(c cmdIO, l client.FeedTokenList, err error) error {
	if err != nil {
		return err
	}
	if c.flags.json() {
		return writeJSON(c.stdout, l.Raw)
	}
	t := newTable(c.stdout, "ID", "CREATED_AT", "EXPIRES_AT")
	for _, tok := range l.Data {
		exp := "never"
		if tok.ExpiresAt != nil {
			exp = fmtTime(*tok.ExpiresAt)
		}
		t.row(tok.ID, fmtTime(tok.CreatedAt), exp)
	}
	if err := t.flush(); err != nil {
		return err
	}
	if len(l.Data) == 0 {
		fmt.Fprintln(c.stdout, "(no feed tokens)")
	}
	return nil
}
