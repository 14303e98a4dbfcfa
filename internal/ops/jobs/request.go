package jobs

import "time"

// RequestError says why a job's request was refused, before any job
// started; the API answers it with 400.
type RequestError struct {
	// Kind names the job in the message: "redrive", "replay".
	Kind string
	// Reason is what is wrong with the request.
	Reason string
}

func (e *RequestError) Error() string { return "invalid " + e.Kind + " request: " + e.Reason }

// Selection points into a request at what selects its records: a list of
// ids, or a time range.
type Selection struct {
	IDs          *[]string
	Since, Until **time.Time
}

// Prepare is a Config.Prepare for requests that select records by ids or
// by a time range (which selection points at): it checks a request with
// validate and puts it in its normal form (SortIDs, UTC), so that the same
// request always has the same job id; the job's range ends at Until.
func Prepare[Req any](validate func(Req) error, selection func(*Req) Selection) func(Req) (Req, *time.Time, error) {
	return func(r Req) (Req, *time.Time, error) {
		if err := validate(r); err != nil {
			return r, nil, err
		}
		s := selection(&r)
		*s.IDs, *s.Since, *s.Until = SortIDs(*s.IDs), UTC(*s.Since), UTC(*s.Until)
		return r, *s.Until, nil
	}
}
