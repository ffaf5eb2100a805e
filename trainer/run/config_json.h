/* config_json.h — a run's configuration as the JSON the store keeps (sessions.config, runs.config_json,
 * runs.optimizer_config) and checkpoints carry. Promise: valid JSON whatever the strings hold; numbers
 * read back exactly; NULL only when out of memory. */
#ifndef FP_CONFIG_JSON_H
#define FP_CONFIG_JSON_H

#include "trainer/run/train.h"

/* The optimizer settings ({"lr":0.1,"momentum":0.9,...,"schedule":"constant",...}); malloc'd. */
char *fp_config_optimizer_json(const fp_arm_config *a);
/* The run configuration, with "command" set to `command` and `extra` (NULL, or comma-separated "key":value
 * pairs) appended; malloc'd. */
char *fp_config_json(const fp_train_config *c, const fp_arm_config *a, const char *data, const char *device,
                     const char *command, const char *extra);

#endif
