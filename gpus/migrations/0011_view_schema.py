from django.db import migrations, models


class Migration(migrations.Migration):
    """The form a stored generation was written in: the rows already stored get 0, older
    than any versioned form, so they are published again before a page reads them."""

    dependencies = [
        ("gpus", "0010_view_resource_mig_on"),
    ]

    operations = [
        migrations.AddField(
            model_name="viewstate",
            name="schema",
            field=models.PositiveIntegerField(default=0),
        ),
    ]
