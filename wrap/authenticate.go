package wrap

import (
	"fmt"
	"strings"
)

// Spark's RPC authentication, the fence between a driver's executors and the next incarnation's
// driver (docs/design.md#stale-executors-are-fenced-by-sparks-authentication). On Kubernetes, a
// driver JVM with spark.authenticate=true makes a random secret of its own, unless secret files
// are set (SecurityManager.initializeAuth, Spark 3.5 and 4.1: spark.authenticate.secret is not
// read there), and gives it to the executors it creates (env _SPARK_AUTH_SECRET), and to no one
// else. An executor that outlives its driver still names the driver's stable host and port; with
// the next incarnation's own secret there, it fails the handshake on every connection.
const (
	authSetting = "spark.authenticate"
	fenceOn     = authSetting + "=true"
)

// authSecretFiles are the settings that take the secret from files: they outlive the incarnation,
// so every incarnation's executors share the secret.
var authSecretFiles = []string{ //nolint:gochecknoglobals // constant list
	"spark.authenticate.secret.file",
	"spark.authenticate.secret.driver.file",
	"spark.authenticate.secret.executor.file",
}

// executorFence is what wrap does about Spark's authentication for one driver command: when add
// is set, it gives the command "--conf spark.authenticate=true" (settings); notice, when not
// empty, says why the driver's stale executors are not fenced (wrap logs it).
type executorFence struct {
	add    bool
	notice string
}

// executorFenceOf decides for command (its properties file read with read): authentication is turned on when the app set neither
// spark.authenticate nor a secret file (sparkSetting reads both where spark-submit does). The
// setting goes right before the first of spark-submit's options (withSettings).
func executorFenceOf(command []string, read ReadFile) executorFence {
	var files []string
	for _, key := range authSecretFiles {
		if sparkSetting(command, key, read) != "" {
			files = append(files, key)
		}
	}
	set := sparkSetting(command, authSetting, read)
	switch {
	case len(files) > 0:
		return executorFence{notice: fmt.Sprintf("the Spark secret comes from a file (%s): "+
			"executors of an earlier incarnation share it and are not fenced from this driver", strings.Join(files, ", "))}
	case strings.EqualFold(strings.TrimSpace(set), "false"):
		return executorFence{notice: authSetting + "=false, as the app asks: executors of an earlier incarnation are not fenced from this driver"}
	case set != "":
		return executorFence{}
	}
	// No option of spark-submit's: not a Spark driver (S-0's command has driverset's --conf).
	start, _ := submitOptions(command)
	return executorFence{add: start >= 0}
}

// settings is the setting the fence gives the command (withSettings), none when it adds none.
func (f executorFence) settings() []string {
	if !f.add {
		return nil
	}
	return []string{"--conf", fenceOn}
}
