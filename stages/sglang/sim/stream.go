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
	h := w.Header()
	h["Content-Type"] = []string{"text/event-stream"}
	h["Cache-Control"] = []string{"no-cache"}
	w.WriteHeader(http.StatusOK)
	b := getBuf()
	defer putBuf(b)
	s := sse{w: w, b: b, res: res, model: l.cfg.Model, chat: res.job.api == apiOpenAI, resetAt: -1}
	s.fl, _ = w.(http.Flusher)
	if res.reset {
		s.resetAt = res.n / 2
	}
	if s.chat {
		*b = res.appendChunkHead((*b)[:0], s.model)
		*b = append(*b, `[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}`+"\n\n"...)
		if s.send() != nil {
			return
		}
	}
	if err := l.decodeAll(ctx, res, decodeFrom, s.emit, held); err != nil {
		return
	}
	if res.n == 0 { // decode reported no progress: send the one (final) frame
		if s.emit(0) != nil {
			return
		}
	}
	s.end()
}

// sse is one streamed response as it is written: b holds the frame being
// built; prevR and prevC are the reasoning and content a chat stream has
// sent, each frame carrying what follows them.
type sse struct {
	w            http.ResponseWriter
	fl           http.Flusher // nil when w cannot flush
	b            *[]byte
	res          *result
	model        string
	chat         bool
	resetAt      int // the token count after which the fault resets; -1: never
	prevR, prevC string
}

// send writes the frames in b and flushes them to the client.
func (s *sse) send() error {
	if _, err := s.w.Write(*s.b); err != nil {
		return err
	}
	if s.fl != nil {
		s.fl.Flush()
	}
	return nil
}

// emit sends the frame for the first done tokens (a chat frame only when
// they add text), then resets the connection if the fault's point is
// reached: decodeAll stops at the error.
func (s *sse) emit(done int) error {
	*s.b = (*s.b)[:0]
	if s.chat {
		s.appendChatDelta(done)
	} else {
		*s.b = append(*s.b, "data: "...)
		*s.b = s.res.appendNative(*s.b, done, done >= s.res.n)
		*s.b = append(*s.b, "\n\n"...)
	}
	if len(*s.b) > 0 {
		if err := s.send(); err != nil {
			return err
		}
	}
	if s.resetAt >= 0 && done >= s.resetAt {
		if hj, ok := s.w.(http.Hijacker); ok {
			if conn, rw, err := hj.Hijack(); err == nil {
				_ = rw.Flush()
				abortConn(conn)
			}
		}
		return errReset
	}
	return nil
}

// appendChatDelta appends the chat frame of what the first done tokens
// add to the reasoning and content sent so far; nothing if they add none.
func (s *sse) appendChatDelta(done int) {
	r, c := s.res.chatSplit(done)
	dr, dc := suffixAfter(s.prevR, r), suffixAfter(s.prevC, c)
	s.prevR, s.prevC = r, c
	if dr == "" && dc == "" {
		return
	}
	b := s.res.appendChunkHead(*s.b, s.model)
	b = append(b, `[{"index":0,"delta":{"content":`...)
	b = appendNullable(b, dc)
	b = append(b, `,"reasoning_content":`...)
	b = appendNullable(b, dr)
	*s.b = append(b, `},"logprobs":null,"finish_reason":null}]}`+"\n\n"...)
}

// end sends the last frames: for chat the finish_reason and, when asked,
// the usage; then "data: [DONE]".
func (s *sse) end() {
	b, res := (*s.b)[:0], s.res
	if s.chat {
		reason, matched := res.finishReason()
		b = res.appendChunkHead(b, s.model)
		b = append(b, `[{"index":0,"delta":{},"logprobs":null,"finish_reason":"`...)
		b = append(b, reason...)
		b = append(b, `","matched_stop":`...)
		b = append(b, matched...)
		b = append(b, "}]}\n\n"...)
		if res.job.includeUsage {
			b = res.appendChunkHead(b, s.model)
			b = append(b, `[],"usage":`...)
			b = res.appendUsage(b)
			b = append(b, "}\n\n"...)
		}
	}
	*s.b = append(b, "data: [DONE]\n\n"...)
	_ = s.send()
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
