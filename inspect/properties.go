package inspect

import (
	"context"
	"path"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/driverset/driverset/wrap"
)

// propertiesOf reads the properties file that the driver in pod d (its container named container)
// is started with, from the ConfigMap mounted where the file is: in cluster mode spark-submit puts
// every setting of the app in such a file (spark.properties in its <prefix>-conf-map, mounted at
// /opt/spark/conf), and one of them may cut the id the driver runs with (wrap.Options.RunsAs). Nil
// when the command names no file, no ConfigMap volume holds it, or the ConfigMap or its key is
// gone; the apiserver's error (Forbidden among them) when the ConfigMap cannot be read.
func propertiesOf(ctx context.Context, c kubernetes.Interface, d *corev1.Pod, container string) ([]byte, error) {
	i := slices.IndexFunc(d.Spec.Containers, func(c corev1.Container) bool { return c.Name == container })
	if i < 0 {
		return nil, nil
	}
	ct := &d.Spec.Containers[i]
	o, isWrap, err := wrap.CommandOptions(slices.Concat(ct.Command, ct.Args))
	if !isWrap || err != nil {
		return nil, nil
	}
	file := wrap.PropertiesFile(o.Command)
	if file == "" {
		return nil, nil
	}
	name, key := configMapKeyOf(d, ct, path.Clean(file))
	if name == "" {
		return nil, nil
	}
	cm, err := getOrNil(c.CoreV1().ConfigMaps(d.Namespace).Get(ctx, name, metav1.GetOptions{}))
	if err != nil || cm == nil {
		return nil, err
	}
	if v, ok := cm.Data[key]; ok {
		return []byte(v), nil
	}
	return nil, nil
}

// configMapKeyOf is the ConfigMap and key that file is in container ct of pod d: the ConfigMap
// volume mounted at file's folder (or at file itself, with a subPath), and the key its items map
// to the file's name there (the name itself when the volume lists no items). "" when no ConfigMap
// volume holds it.
func configMapKeyOf(d *corev1.Pod, ct *corev1.Container, file string) (name, key string) {
	for _, m := range ct.VolumeMounts {
		rel := ""
		switch mount := path.Clean(m.MountPath); {
		case m.SubPath != "" && mount == file:
			rel = m.SubPath
		case m.SubPath == "" && strings.HasPrefix(file, mount+"/"):
			rel = strings.TrimPrefix(file, mount+"/")
		default:
			continue
		}
		v := slices.IndexFunc(d.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == m.Name })
		if v < 0 || d.Spec.Volumes[v].ConfigMap == nil {
			return "", ""
		}
		src := d.Spec.Volumes[v].ConfigMap
		if len(src.Items) == 0 {
			return src.Name, rel
		}
		for _, item := range src.Items {
			if path.Clean(item.Path) == rel {
				return src.Name, item.Key
			}
		}
		return "", ""
	}
	return "", ""
}
