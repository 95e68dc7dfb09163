package controller

import (
	"fmt"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
)

// LoggedEvents records each Event as next does and also writes it as one structured log line.
// Every decision of the controller that a user would want to know about (converted, restarting,
// node lost, fenced, recovered, completed, failed, a refused create, a corrected replica count)
// is an Event on the placeholder, so this is the one place they are logged: Events expire after
// an hour, logs are kept and searched by namespace, pod and reason.
func LoggedEvents(next events.EventRecorder, log logr.Logger) events.EventRecorder {
	return loggedEvents{next: next, log: log}
}

type loggedEvents struct {
	next events.EventRecorder
	log  logr.Logger
}

// Eventf implements events.EventRecorder.
func (l loggedEvents) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	l.next.Eventf(regarding, related, eventtype, reason, action, note, args...)
	kv := []any{"type", eventtype, "reason", reason, "message", fmt.Sprintf(note, args...)}
	if m, err := meta.Accessor(regarding); err == nil {
		kv = append(kv, "namespace", m.GetNamespace(), "pod", m.GetName())
	}
	if related != nil {
		if m, err := meta.Accessor(related); err == nil {
			kv = append(kv, "related", m.GetName())
		}
	}
	l.log.Info("decision", kv...)
}
