package urlredact

import "testing"

func TestUserinfo(t *testing.T) {
	for in, want := range map[string][2]string{
		"redis://u:pw@host:6379":      {"redis://u:xxxxx@host:6379", "pw"},
		"rediss//default:pw@host":     {"rediss//default:xxxxx@host", "pw"},
		"redis:/default:pw@host":      {"redis:/default:xxxxx@host", "pw"},
		"redis:default:pw@host":       {"redis:xxxxx@host", "default:pw"},
		"redis:/token@host":           {"redis:/xxxxx@host", "token"},
		"redis:/u:p/w@host":           {"redis:/u:xxxxx@host", "p/w"},
		"redis://u:p/w@host":          {"redis://u:xxxxx@host", "p/w"},
		"kafka://u:p@ss@kafka:9092":   {"kafka://u:xxxxx@kafka:9092", "p@ss"},
		"host:9092":                   {"host:9092", ""},
		"redis://u:@host":             {"redis://u:@host", ""},
		"laneway:pw@kafka.local:9092": {"laneway:xxxxx@kafka.local:9092", "pw"},
	} {
		got, secret := Userinfo(in)
		if got != want[0] || secret != want[1] {
			t.Errorf("Userinfo(%q) = %q, %q; want %q, %q", in, got, secret, want[0], want[1])
		}
	}
}

func TestScrub(t *testing.T) {
	raw := "redis:/default:hunter2@host:6379"
	msg := `redis url redis:/default:hunter2@host:6379: invalid database number: "default:hunter2@host:6379"`
	want := `redis url redis:/default:xxxxx@host:6379: invalid database number: "default:xxxxx@host:6379"`
	if got := Scrub(msg, raw); got != want {
		t.Errorf("Scrub = %q, want %q", got, want)
	}
}
