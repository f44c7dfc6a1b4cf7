# fleetnap shared code for modules. Standard library only: this runs on targets.
