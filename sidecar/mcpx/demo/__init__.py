"""The bundled demo upstream server."""
