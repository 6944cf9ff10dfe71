package sim

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
)

var errReset = errors.New("connection reset by fault")

// stream writes a generation as Server-Sent Events while it decodes. Native
// frames carry the cumulative text, output_ids and meta_info (finish_reason
// null until the last); chat frames carry deltas of content and
// reasoning_content, then a frame with finish_reason, an optional usage
// frame, then "data: [DONE]".
//
// A retracted stream (decodeAll) pauses its frames until it decodes again;
// native frames' meta_info num_retractions counts it.
func (l *life) stream(ctx context.Context, w http.ResponseWriter, res *result, decodeFrom time.Time, held *bool) {
	fl, _ := w.(http.Flusher)
	h := w.Header()
	h["Content-Type"] = []string{"text/event-stream"}
	h["Cache-Control"] = []string{"no-cache"}
	w.WriteHeader(http.StatusOK)
	b := getBuf()
	defer putBuf(b)
	chat := res.job.api == apiOpenAI
	resetAt := -1
	if res.reset {
		resetAt = res.n / 2
	}
	var prevR, prevC string
	send := func() error {
		if _, err := w.Write(*b); err != nil {
			return err
		}
		if fl != nil {
			fl.Flush()
		}
		return nil
	}
	if chat {
		*b = res.appendChunkHead((*b)[:0], l.cfg.Model)
		*b = append(*b, `[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}`+"\n\n"...)
		if send() != nil {
			return
		}
	}
	emit := func(done int) error {
		*b = (*b)[:0]
		if chat {
			r, c := res.chatSplit(done)
			dr, dc := suffixAfter(prevR, r), suffixAfter(prevC, c)
			prevR, prevC = r, c
			if dr != "" || dc != "" {
				*b = res.appendChunkHead(*b, l.cfg.Model)
				*b = append(*b, `[{"index":0,"delta":{"content":`...)
				*b = appendNullable(*b, dc)
				*b = append(*b, `,"reasoning_content":`...)
				*b = appendNullable(*b, dr)
				*b = append(*b, `},"logprobs":null,"finish_reason":null}]}`+"\n\n"...)
			}
		} else {
			*b = append(*b, "data: "...)
			*b = res.appendNative(*b, done, done >= res.n)
			*b = append(*b, "\n\n"...)
		}
		if len(*b) > 0 {
			if err := send(); err != nil {
				return err
			}
		}
		if resetAt >= 0 && done >= resetAt {
			if hj, ok := w.(http.Hijacker); ok {
				if conn, rw, err := hj.Hijack(); err == nil {
					_ = rw.Flush()
					abortConn(conn)
				}
			}
			return errReset
		}
		return nil
	}
	if err := l.decodeAll(ctx, res, decodeFrom, emit, held); err != nil {
		return
	}
	if res.n == 0 { // decode reported no progress: send the one (final) frame
		if emit(0) != nil {
			return
		}
	}
	*b = (*b)[:0]
	if chat {
		reason, matched := res.finishReason()
		*b = res.appendChunkHead(*b, l.cfg.Model)
		*b = append(*b, `[{"index":0,"delta":{},"logprobs":null,"finish_reason":"`...)
		*b = append(*b, reason...)
		*b = append(*b, `","matched_stop":`...)
		*b = append(*b, matched...)
		*b = append(*b, "}]}\n\n"...)
		if res.job.includeUsage {
			*b = res.appendChunkHead(*b, l.cfg.Model)
			*b = append(*b, `[],"usage":`...)
			*b = res.appendUsage(*b)
			*b = append(*b, "}\n\n"...)
		}
	}
	*b = append(*b, "data: [DONE]\n\n"...)
	_ = send()
}

// appendChunkHead appends `data: {"id":…,"object":"chat.completion.chunk",
// "created":…,"model":…,"choices":` (the caller finishes the object).
func (res *result) appendChunkHead(b []byte, model string) []byte {
	b = append(b, `data: {"id":`...)
	b = appendJSONString(b, res.job.rid)
	b = append(b, `,"object":"chat.completion.chunk","created":`...)
	b = strconv.AppendInt(b, res.start.Unix(), 10)
	b = append(b, `,"model":`...)
	b = appendJSONString(b, cmp(res.job.model, model))
	return append(b, `,"choices":`...)
}

// suffixAfter returns what cur adds to prev.
func suffixAfter(prev, cur string) string {
	if strings.HasPrefix(cur, prev) {
		return cur[len(prev):]
	}
	return cur
}
