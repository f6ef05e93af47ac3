package hostilesuite

import "os"

var interrupt = os.Interrupt
